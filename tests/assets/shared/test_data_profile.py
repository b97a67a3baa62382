"""The data profile the patch and plan prompts show (assets/shared/data_profile.py): real columns,
types and shapes, bounded, never a hidden file, a link or an oversized file; and the prompts'
Data section and stack line."""
import json
import os

import numpy as np
import pytest

from assets.editing.prompts import system_prompt
from assets.experiment_plans.prompts import plan
from assets.patched_code.prompts import implement
from assets.shared import data_profile as dp
from assets.shared.data_profile import data_profile, data_section, topic_data
from bench.effectiveness_bench import DEV_TASKS
from schemas.topic import load_topic


def _mixed_csv(path, rows=300):
    lines = ["id,city,price,rooms,has_garden,built"]
    cities = ["Lyon", "Porto", "Turin"]
    for i in range(rows):
        price = "" if i % 10 == 3 else f"{100 + i * 1.5:.1f}"
        lines.append(f"h{i},{cities[i % 3]},{price},{i % 5 + 1},{'true' if i % 2 else 'false'},{1950 + i % 60}")
    path.write_text("\n".join(lines) + "\n")


def test_a_mixed_csv_names_every_column_with_its_type_and_stays_under_the_limit(tmp_path):
    _mixed_csv(tmp_path / "train.csv")
    text = data_profile(tmp_path, limit_chars=1500)
    assert len(text) <= 1500
    assert "train.csv" in text and "300 rows x 6 columns" in text
    for line in ("id: str, unique", "city: str, 3 levels: Lyon, Porto, Turin", "price: float, 100..548.5, 30 missing",
                 "rooms: int, 1..5 (5 values)", "has_garden: bool", "built: int, 1950..2009"):
        assert line in text, line
    assert "h0,Lyon,100.0,1,false,1950" in text  # a real row, as it is in the file
    short = data_profile(tmp_path, limit_chars=300)
    assert len(short) <= 300 and "train.csv" in short


def test_the_profile_is_deterministic_and_empty_without_data(tmp_path):
    (tmp_path / "experiment.py").write_text("print(1)\n")
    assert data_profile(tmp_path) == "" and data_section("") == ""
    _mixed_csv(tmp_path / "a.csv", 20)
    assert data_profile(tmp_path) == data_profile(tmp_path)
    assert data_profile(tmp_path / "missing") == ""


def test_npz_and_npy_give_shapes_dtypes_and_ranges(tmp_path):
    np.savez_compressed(tmp_path / "train.npz", images=np.arange(2 * 8 * 8, dtype=np.uint8).reshape(2, 8, 8) % 17,
                        labels=np.array([3, 7], dtype=np.int64))
    np.save(tmp_path / "emb.npy", np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    text = data_profile(tmp_path)
    assert "images: shape (2, 8, 8), dtype uint8, 0..16" in text
    assert "labels: shape (2,), dtype int64, values 3, 7" in text
    assert "array: shape (3, 4), dtype float32, -1..1" in text


def test_an_array_too_large_to_load_gives_its_header_only(tmp_path, monkeypatch):
    monkeypatch.setattr(dp, "ARRAY_BYTES", 64)
    np.savez(tmp_path / "big.npz", x=np.zeros((100, 3)))
    text = data_profile(tmp_path)
    assert "x: shape (100, 3), dtype float64" in text and ".." not in text.split("dtype float64")[1]


def test_oversized_symlinked_hidden_and_deep_files_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(dp, "MAX_BYTES", 2000)
    (tmp_path / "big.csv").write_text("secret_col,b\n" + "1,2\n" * 1000)
    outside = tmp_path.parent / f"{tmp_path.name}_outside.csv"
    outside.write_text("leaked_col\n1\n")
    os.symlink(outside, tmp_path / "link.csv")
    (tmp_path / "linked_dir").symlink_to(tmp_path.parent, target_is_directory=True)
    (tmp_path / "test_labels.csv").write_text("id,label_col\n1,2\n")
    deep = tmp_path / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "deep.csv").write_text("deep_col\n1\n")
    (tmp_path / "ok.json").write_text(json.dumps({"classes": ["cat", "dog"], "size": 32}))
    text = data_profile(tmp_path, exclude=["test_labels.csv"])
    assert "big.csv" in text and "not read (over the" in text and "secret_col" not in text
    assert "link" not in text and "leaked_col" not in text and "linked_dir" not in text
    assert "label_col" not in text and "test_labels" not in text
    assert "deep_col" not in text
    assert 'classes: list of 2 x str "cat"' in text and "size: int 32" in text


def test_a_broken_file_is_described_not_raised(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not a zip at all")
    (tmp_path / "bad.json").write_text("{oops")
    text = data_profile(tmp_path)
    assert "bad.npz" in text and "not read: BadZipFile" in text and "bad.json" in text and "not valid JSON" in text


def test_many_files_are_capped_and_counted(tmp_path):
    for k in range(dp.MAX_FILES + 3):
        (tmp_path / f"f{k:02d}.csv").write_text(f"c{k}\n1\n")
    text = data_profile(tmp_path)
    assert text.count(".csv (") == dp.MAX_FILES and "(3 more data files not shown)" in text


def test_wide_numbered_columns_are_one_line_and_a_repeated_table_names_the_first(tmp_path):
    header = "id," + ",".join(f"pixel_{k}" for k in range(64)) + ",label"
    row = "a," + ",".join(str(k % 17) for k in range(64)) + ",3"
    (tmp_path / "train.csv").write_text(header + "\n" + row + "\n" + row + "\n")
    (tmp_path / "test.csv").write_text(header.rsplit(",", 1)[0] + "\n" + row.rsplit(",", 1)[0] + "\n")
    text = data_profile(tmp_path)
    assert "pixel_0 .. pixel_63 (64 columns): int, 0..16" in text
    assert "1 rows x 65 columns: those of train.csv without label" in text


def test_jsonl_and_parquet_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "reviews.jsonl").write_text("\n".join(json.dumps({"text": f"good film {i}", "stars": i % 5})
                                                        for i in range(10)) + "\n")
    pq.write_table(pa.table({"x": [1.5, 2.5, None], "group": ["a", "b", "a"]}), tmp_path / "t.parquet")
    text = data_profile(tmp_path)
    assert "10 rows x 2 columns" in text and "stars: int, 0..4" in text
    assert "3 rows x 2 columns" in text and "x: double, 1.5..2.5, 1 missing" in text and "group: string" in text


def test_the_patch_and_plan_prompts_show_the_data_section_and_the_code_stack():
    spec = load_topic(DEV_TASKS / "wine_alcohol_regression")
    code = spec.code_path.read_text()
    data = topic_data(spec)
    assert "colour_band" in data and "alcohol" in data and "test_labels" not in data
    msgs = implement(code, spec.code, "whole", "t", "s", ["change the model"], data=data)
    user = msgs[1]["content"]
    assert "Data: the files in the folder" in user and "cultivar: str, 3 levels: A, B, C" in user
    assert user.index("Data:") < user.index("Keep the command-line arguments")
    assert "Data:" not in implement(code, spec.code, "whole", "t", "s", ["x"])[1]["content"]
    planned = plan(code, "rmse", "i1", "t", "e", "s", data=data)
    assert "cultivar: str, 3 levels" in planned[1]["content"]
    assert "scikit-learn" in planned[0]["content"] and "PyTorch" not in planned[0]["content"]
    assert "Data:" not in plan(code, "rmse", "i1", "t", "e", "s")[1]["content"]


def test_the_plan_prompt_names_the_code_s_own_stack():
    ipd = (DEV_TASKS / "ipd_strategy" / "strategy.py").read_text()
    assert "plain Python (the standard library)" in plan(ipd, "mean_payoff", "i", "t", "e", "s")[0]["content"]
    torch_code = "import numpy as np\nimport torch\nfrom torch import nn\n"
    assert "Python with NumPy and PyTorch" in plan(torch_code, "accuracy", "i", "t", "e", "s")[0]["content"]
    assert "PyTorch" not in system_prompt("import numpy\n", "x.py") and "NumPy" in system_prompt("import numpy\n",
                                                                                                 "x.py")
