"""Columns an edit reads that the data does not have: found in the code, refused before a run."""
from types import SimpleNamespace

import pytest

from assets.editing.columns import column_refusal, data_columns, invented_columns

COLUMNS = {"id", "age", "income", "city", "target"}

BASE = '''import pandas as pd
from sklearn.linear_model import Ridge

df = pd.read_csv("data.csv")
X = df[["age", "income"]]
y = df["target"]
model = Ridge().fit(X, y)
'''


def edited(line: str, after: str = 'X = df[["age", "income"]]') -> str:
    return BASE.replace(after, after + "\n" + line)


@pytest.mark.parametrize("line, invented", [
    ('X = df[["age", "income", "Feature1"]]', ["Feature1"]),
    ('X["ratio"] = X["Feature1"] / X["Feature2"]', ["Feature1", "Feature2"]),
    ('X = df.drop(columns=["target", "salary"])', ["salary"]),
    ('Z = df.loc[:, "height"]', ["height"]),
    ('df = df.dropna(subset=["zip_code"])', ["zip_code"]),
    ('Z = pd.get_dummies(df, columns=["country"])', ["country"]),
    ('T = X.copy()\nT2 = T[["weight"]]', ["weight"]),  # a table made from a table
])
def test_a_column_the_data_lacks_is_found(line, invented):
    assert invented_columns(BASE, edited(line), COLUMNS) == invented


@pytest.mark.parametrize("line", [
    'X = df[["age", "income", "city"]]',                              # real columns
    'df["age2"] = df["age"] ** 2\nX = df[["age", "age2"]]',            # created before it is read
    'df = df.assign(log_income=df["income"])\nX = df[["log_income"]]',
    'df = df.rename(columns={"income": "salary"})\nX = df[["salary"]]',
    'X = pd.get_dummies(df, columns=["city"])\nX = X[["city_Paris"]]',  # a one-hot column of a real one
    'scores = {"rmse": 1.0}\nprint(scores["rmse"])',                  # a dictionary, not a table
    'import os\nhome = os.environ["HOME"]',
    'Z = df.iloc[:, 0]',
])
def test_real_created_and_non_table_names_pass(line):
    assert invented_columns(BASE, edited(line), COLUMNS) == []


def test_only_what_the_edit_brings_in_is_judged():
    before = BASE.replace('df["target"]', 'df["Target"]')  # the code already named it: not the edit's doing
    assert invented_columns(before, before + 'print(df["Target"].mean())\n', COLUMNS) == []
    assert invented_columns(before, before + 'print(df["Outcome"].mean())\n', COLUMNS) == ["Outcome"]


def test_without_known_columns_or_parsable_code_nothing_is_refused():
    assert invented_columns(BASE, edited('Z = df["Feature1"]'), set()) == []
    assert invented_columns(BASE, "def broken(:\n", COLUMNS) == []


def test_the_refusal_names_the_real_columns():
    why = column_refusal(["Feature1", "Feature2"], COLUMNS)
    assert "'Feature1', 'Feature2'" in why and "age, city, id, income, target" in why
    many = column_refusal(["x"], {f"c{i:03d}" for i in range(50)})
    assert "c000" in many and "(20 more)" in many and "c049" not in many


def test_data_columns_reads_the_folders_tables_but_not_hidden_files(tmp_path):
    (tmp_path / "train.csv").write_text("id,age,income,target\n1,30,100,0\n")
    (tmp_path / "test_labels.csv").write_text("id,secret\n1,0\n")
    (tmp_path / "notes.txt").write_text("not data")
    assert data_columns(tmp_path, ["test_labels.csv"]) == {"id", "age", "income", "target"}
    assert data_columns(tmp_path / "missing") == set()


def test_a_patch_reading_an_invented_column_is_refused_before_a_run(tmp_path):
    from assets.editing.edit_formats import EditError
    from assets.patched_code.patching import check_edit
    from schemas.topic import load_topic

    tmp_path = tmp_path / "t"
    tmp_path.mkdir()
    (tmp_path / "data.csv").write_text("id,age,income,city,target\n1,30,100,Paris,0\n2,40,80,Rome,1\n")
    (tmp_path / "experiment.py").write_text(BASE)
    (tmp_path / "topic.yaml").write_text(
        "name: t\ntitle: t\ndescription: a table\ncode: experiment.py\n"
        "run: python experiment.py --out_dir {out_dir}\nmetric: {name: r2, goal: maximize}\n")
    spec = load_topic(tmp_path)
    real = edited('X = df[["age", "income", "city"]]\nX = pd.get_dummies(X)')
    assert check_edit(BASE, SimpleNamespace(code=real), spec).code == real
    with pytest.raises(EditError) as e:
        check_edit(BASE, SimpleNamespace(code=edited('X = df[["age", "Feature1"]]')), spec)
    assert e.value.status == "not_applied" and "'Feature1'" in str(e.value) and "income" in str(e.value)
