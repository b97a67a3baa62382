"""Checks for the shipped pointcloud_classification topic."""
from tests.support import paths
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

TOPIC = paths.EXPERIMENTS / "pointcloud_classification"
VENV_PY = paths.REPO / ".venv" / "bin" / "python"


def _load_shapes():
    spec = importlib.util.spec_from_file_location("pointcloud_shapes", TOPIC / "shapes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_make_dataset_deterministic_and_shaped():
    shapes = _load_shapes()
    a = shapes.make_dataset(n_train=60, n_test=30, n_points=64, seed=3)
    b = shapes.make_dataset(n_train=60, n_test=30, n_points=64, seed=3)
    c = shapes.make_dataset(n_train=60, n_test=30, n_points=64, seed=4)
    x_train, y_train, x_test, y_test, names = a
    assert len(names) >= 10 and len(set(names)) == len(names)
    assert x_train.shape == (60, 64, 3) and x_train.dtype == np.float32
    assert x_test.shape == (30, 64, 3) and x_test.dtype == np.float32
    assert y_train.shape == (60,) and y_train.dtype == np.int64
    assert y_test.shape == (30,) and y_test.dtype == np.int64
    assert y_train.min() >= 0 and max(y_train.max(), y_test.max()) < len(names)
    assert np.isfinite(x_train).all() and np.abs(x_train).max() <= 1.0 + 1e-5
    for u, v in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])


def test_experiment_dry_run(tmp_path):
    py = str(VENV_PY) if VENV_PY.exists() else sys.executable
    out = tmp_path / "out"
    proc = subprocess.run([py, "experiment.py", "--dry_run", "--out_dir", str(out)],
                          cwd=TOPIC, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads((out / "final_info.json").read_text())
    assert isinstance(info["accuracy"], float) and 0.0 <= info["accuracy"] <= 1.0
    assert isinstance(info["train_loss"], float)
