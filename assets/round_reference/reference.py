"""What a round works on (stacked wins, pure logic).

`round_reference` is the first asset of a round: it reads the previous round's `best_code`
record through the record store and decides the round's reference code, the code that
`ideas`, `experiment_plans`, `patched_code` and `run_results` edit and run:

* topic.yaml `reference: best` (default): the best verified code so far (the original reference
  code until an idea is judged an improvement over it, see assets/best_code/stacking.py);
* `reference: baseline`: always the original reference code (DOLPHIN's fixed reference).

Either way the record carries the current best (code, seed values, chain of ideas), against
which `feedback_summary` also judges every idea. Stages read the reference with
`reference_of(topic_brief, round_reference)`, never from disk or the store."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import polars as pl

from assets.shared.topics import CapturedTopic, code_sha256, topic_of
from assets.shared.verdicts import run_seconds, seed0_metrics, seed_summary
from resources.store import RecordStore, Store, round_number
from schemas.frames import from_frame
from schemas.records import BestCode, RoundReference, RunResult
from schemas.topic import TopicSpec


def runs_sha256(spec: TopicSpec) -> str:
    """What a metric value depends on besides the code: the commands, the hidden files and the
    metric. A best measured under other commands is not comparable and is not carried over."""
    what = {"run": spec.run, "score": spec.score, "hidden": spec.hidden, "metric": spec.metric.name,
            "goal": spec.metric.goal, "timeout": spec.budget.run_timeout_s}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float | None, float, float | None,
                                                                         float | None]:
    """(mean, spread, low, high): the mean over seeds with its t-interval (None for one value)."""
    mean, spread = seed_summary(values)
    if mean is None or len(values) < 2:
        return mean, spread, None, None
    from scipy import stats  # lazy: scipy costs an import

    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * spread / len(values) ** 0.5
    return mean, spread, round(mean - half, 6), round(mean + half, 6)


def baseline_best(topic: CapturedTopic, base: RunResult, round_key: str = "") -> BestCode:
    """The original reference code as the best: what a topic has before any improvement."""
    spec = topic.spec
    values = [v for v in (base.seed_values or [base.metric_value]) if v is not None]
    mean, spread, lo, hi = mean_interval(values)
    return BestCode(topic=spec.name, round=round_key, source="baseline", reason="the original reference code",
                    code=topic.code, code_sha256=topic.code_sha256, original_sha256=topic.code_sha256,
                    runs_sha256=runs_sha256(spec), metric_name=spec.metric.name, metric_goal=spec.metric.goal,
                    metric_value=mean, seed_values=values, metric_spread=spread, ci_low=lo, ci_high=hi,
                    baseline_value=mean, seed0_metrics=seed0_metrics(base.metrics, spec.metric.name),
                    run_s=run_seconds(base.attempts))


def previous_best(store: RecordStore | Store, topic: str, round_key: str) -> tuple[BestCode | None, str]:
    """(the best_code of the latest round before `round_key`, its partition) or (None, '').
    A finished round after it (one with feedback) that had a round_reference but has no
    best_code means the chain is broken (its best_code failed or was never materialised): that
    is an error, not a silent fall-back to an older best. Rounds without a round_reference
    (stored before stacking existed) are passed over."""
    n = round_number(round_key)
    done = [rk for rk in store.rounds("best_code", topic) if round_number(rk) < n]
    last = done[-1] if done else ""
    after = round_number(last) if last else 0
    missing = [rk for rk in store.rounds("feedback_summary", topic) if after < round_number(rk) < n
               and store.read("round_reference", topic, rk) is not None]
    if missing:
        raise ValueError(f"{topic}: round(s) {', '.join(missing)} have feedback but no best_code: materialise "
                         f"best_code for them before {round_key}")
    if not done:
        return None, ""
    return from_frame(store.read("best_code", topic, last), BestCode)[0], f"{last}|{topic}"


def make_reference(topic: CapturedTopic, base: RunResult, prev: BestCode | None, round_key: str,
                   read_from: str = "") -> RoundReference:
    """The round's reference by topic.yaml `reference`, with the current best beside it. A best
    recorded for another capture of the reference code, or under other commands, is dropped
    (the note says why): the round starts again from the original."""
    spec = topic.spec
    start = baseline_best(topic, base)
    note = "no best code recorded before this round: the original"
    best = start
    if prev is not None:
        if prev.original_sha256 != topic.code_sha256:
            note = f"the best of {read_from} was built on other reference code: the original"
        elif prev.runs_sha256 != runs_sha256(spec):
            note = f"the best of {read_from} was measured under other commands or metric: the original"
        else:
            best = prev
            note = (f"the best so far ({prev.source}, from {read_from})" if prev.source != "baseline"
                    else f"no improvement recorded up to {read_from}: the original")
    ref = best if spec.reference == "best" else start
    if spec.reference == "baseline":
        note = "topic.yaml reference: baseline: the original; " + note.replace(": the original", "")
    return RoundReference(topic=spec.name, round=round_key, mode=spec.reference, source=ref.source, code=ref.code,
                          code_sha256=ref.code_sha256, values=ref.seed_values, seed0_metrics=ref.seed0_metrics,
                          run_s=ref.run_s,
                          chain=ref.chain, best=best,
                          read_from=read_from, note=note)


@dataclass(frozen=True)
class RoundTopic:
    """The topic as the round works on it: the captured spec, the round's reference code and
    the record it came from (`captured` keeps the original capture)."""
    captured: CapturedTopic
    reference: RoundReference

    @property
    def spec(self) -> TopicSpec:
        return self.captured.spec

    @property
    def code(self) -> str:
        return self.reference.code

    @property
    def code_sha256(self) -> str:
        return self.reference.code_sha256

    @property
    def best(self) -> BestCode:
        return self.reference.best

    @property
    def reference_mean(self) -> float | None:
        """Mean of the reference code's seeds (the gate for repeating an idea's seeds), or None
        for the original, whose seeds the runs read from their memo (experimenting.baseline_values)."""
        return None if self.reference.source == "baseline" else seed_summary(self.reference.values)[0]

    @property
    def reference_metrics(self) -> dict[str, float]:
        """What the reference code's seed-0 run reported (empty in records made before the rule)."""
        return self.reference.seed0_metrics

    def to_json(self) -> str:
        """The spec and the round's reference code in CapturedTopic.to_json's format (read back with
        assets.shared.topics.spec_and_code_from_json)."""
        b = self.captured.brief
        return json.dumps({"spec": b.spec_json, "dir": b.topic_dir, "code": self.code, "code_sha256": self.code_sha256})


def reference_of(topic_brief: pl.DataFrame, round_reference: pl.DataFrame) -> RoundTopic:
    """The round's reference from the `round_reference` input, checked against its code's sha256
    and against the `topic_brief` capture it was decided from."""
    topic = topic_of(topic_brief)
    rows = from_frame(round_reference, RoundReference)
    if len(rows) != 1:
        raise ValueError(f"round_reference must hold one row, got {len(rows)}")
    ref = rows[0]
    if code_sha256(ref.code) != ref.code_sha256:
        raise ValueError(f"round_reference of {ref.round}|{ref.topic}: the code does not match its sha256")
    if ref.best.original_sha256 != topic.code_sha256:
        raise ValueError(f"round_reference of {ref.round}|{ref.topic} was decided for another topic_brief "
                         "capture: materialise round_reference again")
    return RoundTopic(captured=topic, reference=ref)


def reference_metadata(rt: RoundTopic) -> dict:
    """Which reference a stage used (beside topic_metadata's capture of the original)."""
    return {"reference": rt.reference.mode, "reference_source": rt.reference.source,
            "reference_code_sha256": rt.code_sha256}
