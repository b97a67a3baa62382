"""Stacked wins: an idea judged an improvement becomes the next round's reference code
(topic.yaml `reference: best`), verdicts are reported against the original baseline and the
current best, best_code records the chain of ideas, lineage shows the ancestry; with
`reference: baseline` every round edits the original.

The rounds run for real (Dagster, sandboxed runs with 2 seeds, embeddings, checks) on a tiny
topic whose metric is the sum of switches in its code, so each idea's effect is known exactly;
the LLM is the scripted fake server with this file's ideas and edits."""
from __future__ import annotations

import json
import re

import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.best_code.stacking import next_best
from assets.feedback_summary.feedback import summarise
from assets.round_reference.reference import baseline_best, make_reference, previous_best
from assets.shared.partitions import multi_key
from assets.shared.topics import captured_fields, topic_of
from resources.store import Store
from schemas.frames import from_frame, to_frame
from schemas.records import (
    BestCode,
    Feedback,
    FilteredIdea,
    Patch,
    RoundReference,
    RunResult,
    TopicBrief,
)
from schemas.topic import load_topic
from tests.support.fake_llm import FakeLLMServer, Script, _code_in
from tests.support.resources import make_resources

TOPIC = "stack_toy"

EXPERIMENT = '''"""Stacking toy: the score is the sum of three switches plus a small seed effect."""
import argparse
import json
import os

GAIN_A = 0.0
GAIN_B = 0.0
GAIN_C = 0.0


def score(seed):
    return 0.5 + GAIN_A + GAIN_B + GAIN_C + 0.002 * (seed % 3)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out_dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
        json.dump({"accuracy": score(args.seed)}, f)
'''

TOPIC_YAML = """name: stack_toy
title: Toy point set classification with switches
description: >
  Classify point sets; the score rises with three switches in the code. Input: point sets; output: a class.
code: experiment.py
run: python experiment.py --seed {seed} --out_dir {out_dir}
metric: {name: accuracy, goal: maximize, tolerance: 0.005, bounds: [0, 1]}
budget: {rounds: 2, ideas_per_round: 2, papers: 4, debug_attempts: 0, run_timeout_s: 60, seeds: 2}
ideation: {novelty_rounds: 0, sources: SOURCES}
reference: REFERENCE
"""


def _draft(name, title, summary):
    return {"Name": name, "Title": title, "Experiment": title + ".", "Summary": summary, "References": [],
            "Builds_on": []}


ROUND1 = [_draft("gain_a", "Switch on gain A", "Turn the first switch of the scorer fully on to lift every score."),
          _draft("gain_c", "Switch on gain C", "Enable the third switch halfway, a smaller lift than the first.")]
ROUND2 = [_draft("gain_b", "Switch on gain B", "Flip the second switch, independent of the others, for a lift."),
          _draft("nudge_c", "Nudge gain C slightly", "Set the third switch to a tiny value below the tolerance.")]
# idea title -> (constant, value) the scripted patch sets
EDITS = {"Switch on gain A": ("GAIN_A", 0.1), "Switch on gain C": ("GAIN_C", 0.05),
         "Switch on gain B": ("GAIN_B", 0.1), "Nudge gain C slightly": ("GAIN_C", 0.003)}


class StackScript(Script):
    """The round's fake model with this topic's ideas (round 2's prompt lists round 1's ideas) and edits."""

    def answer(self, req: dict) -> str:
        msgs = req["messages"]
        user = msgs[-1]["content"]
        fmt = req.get("response_format") or {}
        name = fmt.get("json_schema", {}).get("name") if fmt else None
        if name == "IdeaList" and "brainstorm" not in user:
            self.count(name)
            return json.dumps({"ideas": ROUND2 if "Switch on gain A" in user else ROUND1})
        if "Implement this idea" in user:
            self.count("text")
            code = _code_in(msgs)
            for title, (const, value) in EDITS.items():
                if title in user:
                    return "```python\n" + re.sub(rf"^{const} = .*$", f"{const} = {value}", code, count=1,
                                                  flags=re.M) + "```"
        return super().answer(req)


def _loop(home, reference: str, sources: str = "[ranking]"):
    """Set up the topic, run rounds 1 and 2; returns (instance, store). The LLM's ideas only by default:
    with the tuning source, round 2 also carries round 1's second win over (see the carry-over test)."""
    folder = home / "experiments" / TOPIC
    folder.mkdir(parents=True)
    (folder / "experiment.py").write_text(EXPERIMENT)
    (folder / "topic.yaml").write_text(TOPIC_YAML.replace("REFERENCE", reference).replace("SOURCES", sources))
    instance = dg.DagsterInstance.ephemeral()
    with FakeLLMServer(StackScript()) as server:
        resources = make_resources(server.base_url)
        instance.add_dynamic_partitions("topics", [TOPIC])
        assert dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=TOPIC, instance=instance,
                              resources=resources).success
        for rk in ("r1", "r2"):
            instance.add_dynamic_partitions("rounds", [rk])
            res = dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(TOPIC, rk)),
                                 instance=instance, resources=resources)
            assert res.success
            failed = [(c.check_name, c.metadata) for c in res.get_asset_check_evaluations() if not c.passed]
            assert failed == []
    return instance, Store()


def _read(store, asset, model, rk):
    return from_frame(store.read(asset, TOPIC, rk), model)


def _by_name(rows):
    return {r.idea_id.split("/")[-1]: r for r in rows}


def _changed(diff: str) -> list[str]:
    """The lines a unified diff removes or adds (without its file headers)."""
    return [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]


def _meta(instance, asset):
    return instance.get_latest_materialization_event(dg.AssetKey(asset)).asset_materialization.metadata


def test_a_verified_win_becomes_the_next_rounds_reference_and_lineage_shows_the_chain(home):
    from pipelines.lineage import best_chain, idea_lineage, lineage
    from tests.support.round_checks import link_problems, round_records, stored_baseline

    instance, store = _loop(home, "best")
    a_id, b_id = f"{TOPIC}/r1/gain_a", f"{TOPIC}/r2/gain_b"
    # round 1 judges against the original (the current best is the original too)
    fb1 = _by_name(_read(store, "feedback_summary", Feedback, "r1"))
    assert fb1["gain_a"].verdict == fb1["gain_a"].baseline_verdict == fb1["gain_a"].best_verdict == "improvement"
    assert fb1["gain_c"].best_verdict == "improvement" and fb1["gain_a"].reference == "baseline"
    best1 = _read(store, "best_code", BestCode, "r1")[0]
    assert best1.improved and best1.source == a_id  # the better of the two improvements
    assert best1.candidates == [a_id, f"{TOPIC}/r1/gain_c"] and best1.chain == [a_id]
    assert best1.seed_values == pytest.approx([0.6, 0.602]) and best1.ci_low < best1.metric_value < best1.ci_high
    assert _changed(best1.diff) == ["-GAIN_A = 0.0", "+GAIN_A = 0.1"]

    # round 2 works on round 1's best code: its reference, its prompts' code, its patches
    ref2 = _read(store, "round_reference", RoundReference, "r2")[0]
    assert ref2.mode == "best" and ref2.source == a_id and ref2.read_from == f"r1|{TOPIC}"
    assert "GAIN_A = 0.1" in ref2.code and ref2.code == best1.code
    # what the reference's seed 0 reported (the no-effect rule's reference), carried from the best
    assert ref2.seed0_metrics == best1.seed0_metrics == {"accuracy": pytest.approx(0.6)}
    ref1 = _read(store, "round_reference", RoundReference, "r1")[0]
    assert ref1.seed0_metrics == {"accuracy": pytest.approx(0.5)}  # the baseline's seed 0, not its mean
    assert ref1.run_s > 0 and ref2.run_s == best1.run_s > 0  # the compute flag's reference time, carried too
    patches = _by_name(_read(store, "patched_code", Patch, "r2"))
    b = patches["gain_b"]
    assert "GAIN_A = 0.1" in b.code and "GAIN_B = 0.1" in b.code
    assert _changed(b.diff) == ["-GAIN_B = 0.0", "+GAIN_B = 0.1"]  # the diff is against the improved code
    assert _meta(instance, "patched_code")["reference_code_sha256"].value == ref2.code_sha256

    # every verdict against the round's reference (the best), the original baseline and the current best
    fb2 = _by_name(_read(store, "feedback_summary", Feedback, "r2"))
    gb, nudge = fb2["gain_b"], fb2["nudge_c"]
    assert gb.reference == a_id and gb.reference_value == pytest.approx(0.601)
    assert gb.verdict == gb.best_verdict == gb.baseline_verdict == "improvement" and gb.effective
    assert gb.delta == pytest.approx(0.1) and gb.best_delta == pytest.approx(0.1)
    assert gb.baseline_delta == pytest.approx(0.2) and gb.baseline_ci_low > 0.19
    # a gain below the tolerance over the best is maintenance, although the code beats the original
    assert nudge.verdict == nudge.best_verdict == "maintenance" and nudge.baseline_verdict == "improvement"
    table = _meta(instance, "feedback_summary")["verdicts"].value
    assert "vs_baseline" in table and "vs_best" in table and f"improvement vs {a_id} +0.1000" in table
    assert link_problems(round_records(store, TOPIC, "r2"), TOPIC, "r2", stored_baseline(store, TOPIC), "maximize",
                         0.005, "accuracy", max_attempts=1) == []

    # best_code after round 2 stacks both wins
    best2 = _read(store, "best_code", BestCode, "r2")[0]
    assert best2.source == b_id and best2.chain == [a_id, b_id] and best2.chain_rounds == ["r1", "r2"]
    assert best2.chain_titles == ["Switch on gain A", "Switch on gain B"]
    assert best2.metric_value == pytest.approx(0.701) and best2.baseline_value == pytest.approx(0.501)
    assert _changed(best2.diff) == ["-GAIN_A = 0.0", "-GAIN_B = 0.0", "+GAIN_A = 0.1", "+GAIN_B = 0.1"]
    meta = _meta(instance, "best_code")
    assert a_id in meta["chain"].value and b_id in meta["chain"].value and meta["improved"].value is True
    assert meta["gain_vs_baseline"].value == pytest.approx(0.2)

    # lineage: what each idea was built on and which best codes contain it; the topic's chain
    text_b = idea_lineage(b_id)
    assert f"the best code of r1: {a_id}" in text_b and f"- best after r2: {b_id}" in text_b
    text_a = idea_lineage(a_id)
    assert "the original reference code" in text_a
    assert f"- best after r1: {a_id}" in text_a and f"- best after r2: {b_id}" in text_a  # still part of it
    assert "not part of any best code" in idea_lineage(f"{TOPIC}/r2/nudge_c")
    chain = best_chain(TOPIC)
    assert f"- r1: {a_id}" in chain and f"- r2: {b_id}" in chain
    assert f"- r1: {a_id}: Switch on gain A" in chain and f"- r2: {b_id}: Switch on gain B" in chain
    assert lineage(TOPIC) == chain and lineage(b_id) == text_b
    from pipelines.cli import main

    assert main(["lineage", TOPIC]) == 0 and main(["lineage", "no_such_topic"]) == 1

    # the CLI's verdict table: what each verdict is against (the comparisons with the baseline and the
    # best are in the record, the UI and `lineage`)
    from rich.console import Console

    from pipelines.cli.verdicts import print_verdicts

    console = Console(record=True, width=400)
    print_verdicts(console, TOPIC, ["r2"])
    text = console.export_text()
    row = next(line for line in text.splitlines() if "nudge_c" in line)
    assert "maintenance" in row and "0.6040 vs 0.6010*" in row
    assert f"* r2: against the best code so far, {a_id} (0.6010)" in text


def test_a_second_win_of_a_round_is_merged_into_the_next_reference_and_verified_again(home):
    """r1 has two wins; gain_a becomes r2's reference, and the tuning source carries gain_c (a change of a
    constant that is no knob, so by a merge of lines) onto it: no LLM call, and its seeds judge it again."""
    from pipelines.lineage import idea_lineage

    _, store = _loop(home, "best", "[ranking, tuning]")
    c_id, carry_id = f"{TOPIC}/r1/gain_c", f"{TOPIC}/r2/carry_gain_c"
    ideas = _by_name(_read(store, "filtered_ideas", FilteredIdea, "r2"))
    carry = ideas["carry_gain_c"]
    assert carry.kept and carry.source == "tuning" and carry.builds_on_ideas == [c_id] and carry.carry.win_id == c_id
    assert _changed(carry.carry.diff) == ["-GAIN_C = 0.0", "+GAIN_C = 0.05"]  # gain_c's own change, against r1's code
    patch = _by_name(_read(store, "patched_code", Patch, "r2"))["carry_gain_c"]
    assert patch.status == "ok" and "no LLM" in patch.drafts[0].how
    assert _changed(patch.diff) == ["-GAIN_C = 0.0", "+GAIN_C = 0.05"] and "GAIN_A = 0.1" in patch.code
    fb = _by_name(_read(store, "feedback_summary", Feedback, "r2"))["carry_gain_c"]
    # on top of gain_a it still lifts the score: verified against r2's reference (gain_a) and the baseline
    assert fb.verdict == fb.baseline_verdict == "improvement" and fb.delta == pytest.approx(0.05)
    assert fb.baseline_delta == pytest.approx(0.15)
    text = idea_lineage(carry_id)  # how it arose: from gain_c, on the best code of r1
    assert f"## builds on earlier ideas\n- {c_id}\n" in text and "the best code of r1: " + f"{TOPIC}/r1/gain_a" in text


def test_reference_baseline_keeps_the_original_and_still_tracks_the_best(home):
    instance, store = _loop(home, "baseline")
    a_id = f"{TOPIC}/r1/gain_a"
    ref2 = _read(store, "round_reference", RoundReference, "r2")[0]
    assert ref2.mode == "baseline" and ref2.source == "baseline" and ref2.best.source == a_id
    assert ref2.code == EXPERIMENT
    b = _by_name(_read(store, "patched_code", Patch, "r2"))["gain_b"]
    assert "GAIN_A = 0.0" in b.code and _changed(b.diff) == ["-GAIN_B = 0.0", "+GAIN_B = 0.1"]
    gb = _by_name(_read(store, "feedback_summary", Feedback, "r2"))["gain_b"]
    # as good as the best, on the original: an improvement over the baseline, not over the best
    assert gb.reference == "baseline" and gb.verdict == gb.baseline_verdict == "improvement"
    assert gb.best_source == a_id and gb.best_verdict == "maintenance" and gb.best_delta == pytest.approx(0.0)
    best2 = _read(store, "best_code", BestCode, "r2")[0]
    assert not best2.improved and best2.source == a_id and best2.chain == [a_id] and best2.candidates == []


# pure logic, no Dagster


def _brief(tmp_path, code=EXPERIMENT, reference="best"):
    folder = tmp_path / TOPIC
    folder.mkdir(exist_ok=True)
    (folder / "experiment.py").write_text(code)
    (folder / "topic.yaml").write_text(TOPIC_YAML.replace("REFERENCE", reference).replace("SOURCES", "[ranking]"))
    spec = load_topic(folder)
    brief = TopicBrief(topic=TOPIC, title=spec.title, description=spec.description, metric_name="accuracy",
                       metric_goal="maximize", task="t", input="i", output="o", domain="d", evaluation="e",
                       search_query="q", **captured_fields(spec, code))
    return topic_of(to_frame([brief], TopicBrief))


def _idea(name):
    return FilteredIdea(idea_id=f"{TOPIC}/r1/{name}", topic=TOPIC, round="r1", name=name, title=name.title(),
                        experiment="e", summary="s", max_similarity=0.0, independent=True, kept=True)


BASE = RunResult(idea_id="b", status="success", metric_value=0.501, seed_values=[0.5, 0.502])


def test_the_best_of_several_improvements_wins_and_no_improvement_keeps_the_best(tmp_path):
    topic = _brief(tmp_path)
    ref = make_reference(topic, BASE, None, "r1")
    assert ref.source == "baseline" and ref.code == EXPERIMENT and ref.values == [0.5, 0.502]
    runs = [RunResult(idea_id=f"{TOPIC}/r1/x", status="success", metric_value=0.551, seed_values=[0.55, 0.552],
                      final_code=EXPERIMENT.replace("GAIN_C = 0.0", "GAIN_C = 0.05")),
            RunResult(idea_id=f"{TOPIC}/r1/y", status="success", metric_value=0.601, seed_values=[0.6, 0.602],
                      final_code=EXPERIMENT.replace("GAIN_A = 0.0", "GAIN_A = 0.1")),
            RunResult(idea_id=f"{TOPIC}/r1/z", status="success", metric_value=0.7, seed_values=[0.7],
                      final_code=EXPERIMENT.replace("GAIN_B = 0.0", "GAIN_B = 0.2"))]  # one seed: not verified
    ideas = [_idea("x"), _idea("y"), _idea("z")]
    fb = summarise(ideas, runs, 0.501, "maximize", 0.005, baseline_values=[0.5, 0.502], reference=ref)
    assert [f.best_verdict for f in fb] == ["improvement", "improvement", "maintenance"]
    best = next_best(topic, ref, fb, runs, ideas, "r1")
    assert best.source == f"{TOPIC}/r1/y" and best.chain == [best.source] and best.chain_titles == ["Y"]
    assert best.candidates == [f"{TOPIC}/r1/x", f"{TOPIC}/r1/y"] and "GAIN_A = 0.1" in best.code
    # minimising, the lower mean wins
    down = next_best(topic.__class__(topic.brief, topic.spec.model_copy(update={"metric": topic.spec.metric.model_copy(
        update={"goal": "minimize"})}), topic.code), ref, fb, runs, ideas, "r1")
    assert down.source == f"{TOPIC}/r1/x"
    # nothing judged an improvement: the current best is carried over, marked as not improved
    kept = next_best(topic, ref, fb[2:], runs, ideas, "r1")
    assert kept.source == "baseline" and not kept.improved and kept.code == EXPERIMENT and kept.chain == []


def _attempt(seconds, exit_code=0):
    from schemas.records import Attempt

    return Attempt(attempt=1, command=["python"], exit_code=exit_code, timed_out=False, duration_s=seconds)


def test_an_improvement_that_ran_much_longer_than_its_reference_says_so(tmp_path):
    """The compute flag: each verdict carries the idea's run time against the reference's, and an
    improvement whose run took COMPUTE_FLAG times as long or more says more compute may explain it."""
    from assets.feedback_summary.feedback import verdict_cells
    from assets.shared.verdicts import COMPUTE_FLAG

    topic = _brief(tmp_path)
    base = BASE.model_copy(update={"attempts": [_attempt(3.0, exit_code=1), _attempt(10.0)]})
    ref = make_reference(topic, base, None, "r1")
    assert ref.run_s == 10.0 and ref.best.run_s == 10.0  # the successful (last) attempt's time
    runs = [RunResult(idea_id=f"{TOPIC}/r1/x", status="success", metric_value=0.551, seed_values=[0.55, 0.552],
                      attempts=[_attempt(10.0 * COMPUTE_FLAG + 1)], final_code=EXPERIMENT + "# x\n"),
            RunResult(idea_id=f"{TOPIC}/r1/y", status="success", metric_value=0.601, seed_values=[0.6, 0.602],
                      attempts=[_attempt(11.0)], final_code=EXPERIMENT + "# y\n"),
            RunResult(idea_id=f"{TOPIC}/r1/z", status="success", metric_value=0.501, seed_values=[0.5, 0.502],
                      attempts=[_attempt(40.0)], final_code=EXPERIMENT + "# z\n")]
    x, y, z = summarise([_idea("x"), _idea("y"), _idea("z")], runs, 0.501, "maximize", 0.005,
                        baseline_values=[0.5, 0.502], reference=ref)
    assert x.verdict == "improvement" and x.compute_ratio == pytest.approx(1.6) and "more compute" in x.reason
    assert y.verdict == "improvement" and y.compute_ratio == pytest.approx(1.1) and "compute" not in y.reason
    assert z.verdict == "maintenance" and z.compute_ratio == pytest.approx(4.0) and "compute" not in z.reason
    assert verdict_cells(x)["run_time"] == "16s (1.6x)"
    # the best code keeps its own run time: the next round's reference compares against it
    best = next_best(topic, ref, [x, y, z], runs, [_idea("x"), _idea("y"), _idea("z")], "r1")
    assert best.source == f"{TOPIC}/r1/y" and best.run_s == 11.0
    assert make_reference(topic, base, best, "r2", f"r1|{TOPIC}").run_s == 11.0
    # runs of a second or two are start-up, not compute: no ratio; a failed last attempt has no time
    short = summarise([_idea("x")], [runs[0].model_copy(update={"attempts": [_attempt(2.0)]})], 0.501, "maximize",
                      0.005, baseline_values=[0.5, 0.502],
                      reference=ref.model_copy(update={"run_s": 1.0}))[0]
    assert short.run_s == 2.0 and short.compute_ratio is None and verdict_cells(short)["run_time"] == "2s"
    failed_last = make_reference(topic, base.model_copy(update={"attempts": [_attempt(9.0, exit_code=1)]}), None, "r1")
    assert failed_last.run_s is None


def test_a_best_from_another_capture_or_other_commands_is_not_carried_over(tmp_path):
    topic = _brief(tmp_path)
    prev = baseline_best(topic, BASE).model_copy(update={
        "source": f"{TOPIC}/r1/y", "code": EXPERIMENT + "# better\n", "chain": [f"{TOPIC}/r1/y"], "round": "r1"})
    from assets.shared.topics import code_sha256

    prev = prev.model_copy(update={"code_sha256": code_sha256(prev.code)})
    assert make_reference(topic, BASE, prev, "r2", "r1|stack_toy").source == f"{TOPIC}/r1/y"
    other = _brief(tmp_path, code=EXPERIMENT + "# edited reference\n")
    ref = make_reference(other, BASE, prev, "r2", "r1|stack_toy")
    assert ref.source == "baseline" and "other reference code" in ref.note and ref.best.source == "baseline"
    moved = prev.model_copy(update={"runs_sha256": "0" * 64})
    assert "other commands" in make_reference(topic, BASE, moved, "r2", "r1|stack_toy").note
    # reference: baseline edits the original but keeps the best to judge against
    base_mode = make_reference(_brief(tmp_path, reference="baseline"), BASE, prev, "r2", "r1|stack_toy")
    assert base_mode.source == "baseline" and base_mode.code == EXPERIMENT and base_mode.best.source == prev.source


def test_a_finished_round_without_best_code_breaks_the_chain(tmp_path):
    store = Store(tmp_path / "records")
    topic = _brief(tmp_path)
    best = baseline_best(topic, BASE, "r1")
    assert previous_best(store, TOPIC, "r2") == (None, "")
    store.write(to_frame([best], BestCode), "best_code", TOPIC, "r1")
    got, where = previous_best(store, TOPIC, "r3")
    assert got.round == "r1" and where == f"r1|{TOPIC}"
    store.write(to_frame([], Feedback), "feedback_summary", TOPIC, "r2")  # a round from before stacking: passed
    assert previous_best(store, TOPIC, "r3")[0].round == "r1"
    ref = make_reference(topic, BASE, best, "r2", f"r1|{TOPIC}")
    store.write(to_frame([ref], RoundReference), "round_reference", TOPIC, "r2")  # r2 ran with stacking ...
    with pytest.raises(ValueError, match="r2 have feedback but no best_code"):  # ... and lost its best_code
        previous_best(store, TOPIC, "r3")
    store.write(to_frame([], Feedback), "feedback_summary", TOPIC, "r1")
    store.path("best_code", TOPIC, "r1").unlink()  # no best_code at all, r2 still broken
    with pytest.raises(ValueError, match="r2 have feedback"):
        previous_best(store, TOPIC, "r3")
