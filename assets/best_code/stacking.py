"""The best verified code after a round (stacked wins, pure logic).

The rule (`next_best`): an idea becomes the new best when its verdict against the current best
(feedback_summary's `best_verdict`, the seed test of assets/shared/verdicts.py) is
*improvement*; among several such ideas the one with the best mean over seeds wins. Its code is
the code that ran (after any repairs), its seed values are those the verdict used, and its chain
is the chain of the code it was built on (the round's reference) plus itself. No improvement:
the current best is carried over unchanged. With topic.yaml `reference: best` the next round
edits this code; with `baseline` it edits the original, and the best is still tracked (a
later idea must beat it to replace it)."""
from __future__ import annotations

from assets.editing.edit_formats import unified_diff
from assets.round_reference.reference import mean_interval
from assets.shared.metadata import md_table
from assets.shared.topics import CapturedTopic, code_sha256
from assets.shared.verdicts import run_seconds, seed0_metrics
from schemas.records import BestCode, Feedback, FilteredIdea, RoundReference, RunResult


def _better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "maximize" else a < b


def next_best(topic: CapturedTopic, ref: RoundReference, feedback: list[Feedback], runs: list[RunResult],
              ideas: list[FilteredIdea], round_key: str) -> BestCode:
    """The best code after `round_key` by the rule in the module docstring."""
    current = ref.best
    goal = topic.spec.metric.goal
    runs_by_id = {r.idea_id: r for r in runs}
    titles = {i.idea_id: i.title for i in ideas}
    candidates = [f for f in feedback if f.best_verdict == "improvement" and f.metric_value is not None
                  and runs_by_id.get(f.idea_id) is not None and runs_by_id[f.idea_id].final_code.strip()]
    ids = [f.idea_id for f in candidates]
    if not candidates:
        why = (f"no idea of {round_key} was judged an improvement over it" if feedback
               else f"{round_key} judged no idea")
        return current.model_copy(update={"round": round_key, "improved": False, "candidates": [],
                                          "reason": f"kept: {why}"})
    win = candidates[0]
    for f in candidates[1:]:
        if _better(f.metric_value, win.metric_value, goal):
            win = f
    run = runs_by_id[win.idea_id]
    values = list(run.seed_values or [run.metric_value])
    mean, spread, lo, hi = mean_interval(values)
    # the code the idea edited: the best so far (reference: best) or the original (its chain is empty)
    earlier = {i: (r, title) for i, r, title in zip(ref.best.chain, ref.best.chain_rounds, ref.best.chain_titles)}
    earlier[win.idea_id] = (round_key, titles.get(win.idea_id, win.title))
    chain = [*ref.chain, win.idea_id]
    return BestCode(
        topic=current.topic, round=round_key, source=win.idea_id, source_round=round_key, improved=True,
        reason=f"{win.title}: improvement over {current.source} ({win.best_delta:+.4g}; the verdict's test)"
        if win.best_delta is not None else f"{win.title}: improvement over {current.source}",
        code=run.final_code, code_sha256=code_sha256(run.final_code), original_sha256=current.original_sha256,
        runs_sha256=current.runs_sha256, diff=unified_diff(topic.code, run.final_code, topic.spec.code),
        metric_name=current.metric_name, metric_goal=current.metric_goal, metric_value=mean, seed_values=values,
        metric_spread=spread, ci_low=lo, ci_high=hi, baseline_value=current.baseline_value,
        seed0_metrics=seed0_metrics(run.metrics, current.metric_name), run_s=run_seconds(run.attempts), chain=chain,
        chain_titles=[earlier[i][1] for i in chain], chain_rounds=[earlier[i][0] for i in chain],
        candidates=ids)


def interval_text(b: BestCode) -> str:
    if b.metric_value is None:
        return "n/a"
    if b.ci_low is None:
        return f"{b.metric_value:.4f} ({len(b.seed_values)} seed)"
    return f"{b.metric_value:.4f} [{b.ci_low:.4f}, {b.ci_high:.4f}] ({len(b.seed_values)} seeds)"


def chain_rows(b: BestCode) -> list[dict]:
    return [{"round": r, "idea_id": i, "title": t} for r, i, t in zip(b.chain_rounds, b.chain, b.chain_titles)]


def chain_table(b: BestCode) -> str:
    """The chain of ideas the code contains, round by round (oldest first)."""
    return md_table(chain_rows(b), ["round", "idea_id", "title"]) if b.chain else "(the original reference code)"


def summary_table(b: BestCode) -> str:
    """One row: the best after the round, its metric with interval, against the baseline."""
    gain = (None if b.metric_value is None or b.baseline_value is None
            else f"{b.metric_value - b.baseline_value:+.4f}")
    return md_table([{"round": b.round, "source": b.source, "improved": b.improved, b.metric_name: interval_text(b),
                      "baseline": b.baseline_value, "gain_vs_baseline": gain, "ideas_in_chain": len(b.chain),
                      "reason": b.reason}],
                    ["round", "source", "improved", b.metric_name, "baseline", "gain_vs_baseline", "ideas_in_chain",
                     "reason"])
