"""The shipped method cards (corpus/method_cards.jsonl): valid, tied to corpus papers, in our own
words, and every library call imports and constructs in the locked environment; plus the topic
matching of resources/method_cards.py."""
import json
import subprocess
import sys

import pytest

from resources.method_cards import (
    CARDS_PATH,
    card_text,
    fit,
    library_call,
    load_cards,
    topic_kinds,
)
from schemas.method_card import MethodCard
from tests.support import paths

REPO = paths.REPO
PAPERS = {json.loads(line)["paper_id"]: json.loads(line) for line in
          (REPO / "corpus" / "papers.jsonl").read_text().splitlines() if line.strip()}
RAW = [json.loads(line) for line in CARDS_PATH.read_text().splitlines() if line.strip()]


def test_cards_are_valid_unique_and_tied_to_corpus_papers():
    ids = [r["paper_id"] for r in RAW]
    assert len(ids) >= 150
    assert len(ids) == len(set(ids)), "one card per paper"
    for r in RAW:
        MethodCard.model_validate(r)  # vocabulary, lengths, settings only with a library
        assert r["paper_id"] in PAPERS, r["paper_id"]
    assert len(load_cards()) == len(RAW)


def _words(text: str) -> list[str]:
    return "".join(ch.lower() if ch.isalnum() else " " for ch in text).split()


def test_no_card_copies_eight_words_of_its_paper_summary():
    run = 8
    for r in RAW:
        summary = _words(PAPERS[r["paper_id"]]["summary"])
        grams = {tuple(summary[i:i + run]) for i in range(len(summary) - run + 1)}
        change = _words(r["change"])
        copied = [" ".join(change[i:i + run]) for i in range(len(change) - run + 1)
                  if tuple(change[i:i + run]) in grams]
        assert not copied, f"{r['paper_id']} copies its summary: {copied[0]!r}"


# every library call in one subprocess: import the callable and call it with the card's settings; an
# optimiser gets a parameter, a scheduler an optimiser, a wrapper a module (the caller's in real code);
# scikit-learn estimators also validate their parameters (they would otherwise fail only at fit)
CONSTRUCT = r"""
import importlib, inspect, json, sys, torch
cards = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
failed = []
for c in cards:
    if not c.get("library"):
        continue
    mod, _, name = c["library"].rpartition(".")
    try:
        obj = getattr(importlib.import_module(mod), name)
        kw = dict(c.get("settings") or {})
        params = inspect.signature(obj).parameters
        if "params" in params:
            kw["params"] = [torch.nn.Parameter(torch.zeros(2))]
        if "optimizer" in params:
            kw["optimizer"] = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1, momentum=0.9)
        for arg in ("model", "module"):
            if arg in params:
                kw[arg] = torch.nn.Linear(4, 4)
        made = obj(**kw)
        if hasattr(made, "_validate_params"):
            made._validate_params()
    except Exception as e:
        failed.append(f"{c['paper_id']}: {c['library']}: {type(e).__name__}: {e}")
print(json.dumps(failed))
"""


def test_every_library_call_imports_and_constructs_in_the_locked_environment():
    with_library = [r for r in RAW if r.get("library")]
    assert len(with_library) >= 60
    out = subprocess.run([sys.executable, "-c", CONSTRUCT, str(CARDS_PATH)], capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    failed = json.loads(out.stdout.strip().splitlines()[-1])
    assert not failed, "\n".join(failed)


def test_card_text_names_the_change_and_the_library_call():
    text = card_text("chen2016xgboost")
    assert text is not None and text.startswith("Method card chen2016xgboost (tabular data, ")
    assert "sklearn.ensemble.HistGradientBoostingRegressor(max_iter=500," in text
    assert card_text("no_such_paper") is None
    c = load_cards()["kipf2017semi"]
    assert library_call(c) is None and "Library call" not in card_text("kipf2017semi")


@pytest.mark.parametrize("texts, data, task", [
    (("House prices", "Predict the sale price from tabular features; metric rmse"), {"tabular"}, {"regression"}),
    (("CIFAR-10", "classify 32x32 RGB images", "accuracy"), {"image"}, {"classification"}),
    (("Sentiment", "classify movie reviews as positive or negative"), {"text"}, {"classification"}),
    (("ModelNet40", "point cloud shape classification"), {"point-cloud"}, {"classification"}),
    (("Some topic", "make the number go up"), set(), set()),
    (("Shapes", "classify point clouds sampled on procedurally generated shapes"), {"point-cloud"}, {"classification"}),
    (("Spam", "label e-mails as spam; the baseline is a logistic regression on word counts"), {"text"},
     {"classification"}),
    (("Faces", "a generative model of face images; metric FID"), {"image"}, {"generation"}),
])
def test_topic_kinds_from_the_topic_words(texts, data, task):
    kinds = topic_kinds(*texts)
    assert kinds.data == data and kinds.task == task


def test_fit_prefers_named_kinds_over_any_and_refuses_other_kinds():
    cards = load_cards()
    kinds = topic_kinds("tabular regression", "rmse")
    assert fit(cards["chen2016xgboost"], kinds) == 4        # tabular, regression named
    assert fit(cards["srivastava2014dropout"], kinds) == 3  # any data, regression named
    assert fit(cards["kingma2015adam"], kinds) == 2         # any, any
    assert fit(cards["yun2019cutmix"], kinds) == 0          # images only
    assert fit(cards["mnih2015human"], kinds) == 0          # decisions only
    assert fit(cards["chen2016xgboost"], topic_kinds("nothing named here")) == 0
