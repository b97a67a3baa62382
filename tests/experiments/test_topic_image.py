"""Checks for the shipped image_classification topic (Fashion-MNIST from Debian's
dataset-fashion-mnist, read from its IDX files)."""
import gzip
import hashlib

import numpy as np
import pytest

from tests.support.topic_checks import (
    check_round,
    load_module,
    needs_bwrap,
    sandboxed_run,
    topic,
)

NAME = "image_classification"


fm = load_module(NAME, "fashion_mnist.py")


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_topic_loads():
    spec = topic(NAME)
    assert spec.metric.name == "accuracy" and spec.metric.goal == "maximize" and spec.metric.tolerance > 0
    assert spec.check and "--dry_run" in spec.check
    assert spec.run_command("out", seed=2)[-4:] == ["--seed", "2", "--out_dir", "out"]


def test_read_idx_gzipped_and_plain(tmp_path):
    images = np.arange(2 * 3 * 4).reshape(2, 3, 4) % 256
    (tmp_path / "a-idx3-ubyte").write_bytes(_idx(images))
    (tmp_path / "b-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images)))
    np.testing.assert_array_equal(fm.read_idx(tmp_path / "a-idx3-ubyte"), images)
    np.testing.assert_array_equal(fm.read_idx(fm.find_file("b-idx3-ubyte", [str(tmp_path)])), images)
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + b"\x00" * 12)
    with pytest.raises(ValueError, match="unsigned-byte IDX"):
        fm.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(_idx(images)[:-1])
    with pytest.raises(ValueError, match="header says"):
        fm.read_idx(tmp_path / "short")


def test_missing_data_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        fm.load_fashion_mnist(dirs=[str(tmp_path)])


def test_loader_shapes_balance_and_split():
    x_train, y_train, x_test, y_test, names = fm.load_fashion_mnist(n_train=2000)
    assert len(names) == 10 and len(set(names)) == 10
    assert x_train.shape == (2000, 1, 28, 28) and x_train.dtype == np.float32
    assert x_test.shape == (10000, 1, 28, 28) and y_test.dtype == np.int64
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0 and x_train.std() > 0.1
    assert np.bincount(y_train).tolist() == [200] * 10  # the class-balanced subset
    assert np.bincount(y_test).tolist() == [1000] * 10  # the official test set
    # stable: the subset is the first 200 of each class in file order, the same every time
    again = fm.load_fashion_mnist(n_train=2000)
    np.testing.assert_array_equal(again[0], x_train)
    full_x, full_y = fm.load_split("train")
    assert full_x.shape[0] == 60000
    first = np.sort(np.concatenate([np.flatnonzero(full_y == c)[:200] for c in range(10)]))
    np.testing.assert_array_equal(full_x[first], x_train)
    # disjoint: no training image is also a test image
    def digest(xs):
        return {hashlib.sha1(x.tobytes()).hexdigest() for x in xs}
    assert not digest(full_x) & digest(x_test)


@needs_bwrap
def test_check_dry_run_in_sandbox(tmp_path):
    res, info = sandboxed_run(topic(NAME), tmp_path)
    assert res.ok and res.sandboxed, res.stderr_tail[-2000:]
    assert "data: 200 train / 200 test images" in res.stdout_tail
    assert isinstance(info["accuracy"], float) and 0.0 <= info["accuracy"] <= 1.0
    assert isinstance(info["train_loss"], float)
    assert res.duration_s < 60


@pytest.mark.slow
@pytest.mark.extended  # make test runs this check on the sentiment topic and this topic's dry run in the sandbox
@needs_bwrap
def test_round_with_fake_llm(home, fake_llm):
    """Baseline, three ideas (one run as patched, one repaired from its traceback, one never
    implemented) and the verdicts, on the real topic in the sandbox (a few minutes on 2 cores)."""
    check_round(NAME, home, fake_llm, baseline_floor=0.8)
