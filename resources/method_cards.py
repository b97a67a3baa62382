"""Method cards (corpus/method_cards.jsonl, schemas/method_card.py): loading, lookup by paper id,
the card as prompt text, and matching cards to a topic.

A topic's kinds of data and output are read from its words (title, description, task attributes,
metric name) by fixed keyword lists, the same vocabulary the cards use; a card applies to a topic
when its data and its task kinds meet the topic's (or say `any`). The ranking keeps the best
applicable method papers (assets/paper_rankings/methods.py) and the ideas prompt shows their cards
(assets/ideas/prompts.py)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from resources.paths import REPO_ROOT
from schemas.method_card import MethodCard

CARDS_PATH = REPO_ROOT / "corpus" / "method_cards.jsonl"


@cache
def _load(path: str) -> dict[str, MethodCard]:
    out: dict[str, MethodCard] = {}
    p = Path(path)
    if not p.is_file():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        if line.strip():
            c = MethodCard.model_validate(json.loads(line))
            out[c.paper_id] = c
    return out


def load_cards(path: Path | str | None = None) -> dict[str, MethodCard]:
    """paper_id -> card, read once per file (a missing file: no cards)."""
    return _load(str(Path(path or CARDS_PATH).resolve()))


def card(paper_id: str, cards: dict[str, MethodCard] | None = None) -> MethodCard | None:
    return (load_cards() if cards is None else cards).get(paper_id)


def library_call(c: MethodCard) -> str | None:
    """The card's library call with its settings, e.g.
    `sklearn.ensemble.HistGradientBoostingRegressor(max_iter=500, learning_rate=0.05)`; None without one."""
    if not c.library:
        return None
    args = ", ".join(f"{k}={v!r}" for k, v in c.settings.items())
    return f"{c.library}({args})"


def card_text(paper_id: str, cards: dict[str, MethodCard] | None = None) -> str | None:
    """The card of `paper_id` as one prompt paragraph (the change, what it suits, the library call),
    or None when the paper has no card."""
    c = card(paper_id, cards)
    if c is None:
        return None
    suits = f"{'/'.join(c.applies_to.data)} data, {'/'.join(c.applies_to.task)}"
    call = library_call(c)
    lib = (f" Library call (installed here; typical arguments, an optimiser's parameters or a wrapper's model "
           f"are yours): {call}." if call else "")
    return f"Method card {c.paper_id} ({suits}): {c.change}{lib}"


# -- a topic's kinds of data and output -----------------------------------------------------------
# Word stems matched at word starts in the topic's text; several kinds may match. The lists stay
# short and unambiguous: "features" or "network" occur in every field and name no kind.

DATA_WORDS: dict[str, tuple[str, ...]] = {
    "tabular": ("tabular", "table", "csv", "spreadsheet", "column", "categorical feature", "numeric feature",
                "numerical feature", "structured data", "dataframe", "feature vector", "rows of"),
    "image": ("image", "pixel", "photo", "picture", "cifar", "mnist", "imagenet", "rgb", "vision", "visual"),
    "text": ("text", "sentence", "word", "token", "document", "language", "nlp", "review", "tweet", "sentiment"),
    "sequence": ("time series", "time-series", "timeseries", "sequence", "sequential", "temporal", "forecast",
                 "signal", "trajectory", "sensor"),
    "graph": ("graph", "node", "edge", "molecul", "adjacency", "citation network", "social network"),
    "point-cloud": ("point cloud", "point-cloud", "pointcloud", "lidar", "point set", "xyz", "modelnet", "shapenet"),
    "audio": ("audio", "speech", "sound", "waveform", "spectrogram", "acoustic", "speaker", "music"),
}
TASK_WORDS: dict[str, tuple[str, ...]] = {
    "classification": ("classif", "label", "classes", "accuracy", "f1", "auc", "segmentation", "tagging"),
    "regression": ("regress", "continuous target", "continuous value", "rmse", "mse", "mae", "r2", "r^2",
                   "r-squared", "mean squared", "mean absolute", "forecast", "price", "real-valued", "numeric target"),
    "generation": ("generative", "generation", "generate new", "generates new", "synthesi", "text-to-",
                   "sample quality", "fid", "inception score", "machine translation", "captioning", "summari"),
    "decision": ("reinforcement", "policy", "reward", "agent", "episode", "control task", "environment steps"),
}


def _pattern(stems: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(s) for s in stems) + ")", re.I)


# phrases whose words would name a kind they are not: a logistic regression classifies, data that was
# "procedurally generated" is not a generation task
_NOT_KINDS = re.compile(r"logistic regression|(?:procedurally|randomly|synthetically) generated", re.I)
_DATA = {k: _pattern(v) for k, v in DATA_WORDS.items()}
_TASK = {k: _pattern(v) for k, v in TASK_WORDS.items()}


@dataclass(frozen=True)
class TopicKinds:
    """The kinds of data and output a topic's words name (empty: none named)."""
    data: frozenset[str]
    task: frozenset[str]

    @property
    def known(self) -> bool:
        return bool(self.data or self.task)


def topic_kinds(*texts: str) -> TopicKinds:
    """The data and task kinds named in the topic's texts (title, description, task, input,
    output, metric name ...)."""
    text = " ".join(t for t in texts if t)
    text = _NOT_KINDS.sub(" ", text)
    return TopicKinds(frozenset(k for k, p in _DATA.items() if p.search(text)),
                      frozenset(k for k, p in _TASK.items() if p.search(text)))


def _side(card_kinds: Sequence[str], topic: frozenset[str]) -> int:
    """2: the card names one of the topic's kinds; 1: the card says any (or the topic names none);
    0: it does not apply."""
    if topic & set(card_kinds):
        return 2
    if "any" in card_kinds or not topic:
        return 1
    return 0


def fit(c: MethodCard, kinds: TopicKinds) -> int:
    """How well the card applies to the topic: 0 (not at all; always 0 for a topic that names no
    kind), else the sum over data and task of 2 (named) or 1 (`any`), so 2..4."""
    if not kinds.known:
        return 0
    d, t = _side(c.applies_to.data, kinds.data), _side(c.applies_to.task, kinds.task)
    return d + t if d and t else 0


def applicable(paper_ids: Iterable[str], kinds: TopicKinds,
               cards: dict[str, MethodCard] | None = None) -> dict[str, int]:
    """paper_id -> fit for the given papers whose card applies to the topic."""
    cards = load_cards() if cards is None else cards
    out = {}
    for pid in paper_ids:
        c = cards.get(pid)
        if c is not None and (f := fit(c, kinds)):
            out[pid] = f
    return out
