"""bench/effectiveness_bench.py: the real driver (`researchloop run` in a subprocess, fresh
DAGSTER_HOME) for one round of the toy topic with the scripted fake LLM, then its summary checked
against the records it was made from; the counting rules on hand-made records (a dead-code
patch is a no-op); the overlap arithmetic of the timing log."""
from __future__ import annotations

import json

import pytest

from resources.timing_log import covered_seconds

TOPIC = "toy_classification"


@pytest.fixture
def bench_run(home, fake_llm, monkeypatch, tmp_path):
    """One round of the bench on the toy topic: (record, work folder, fake server, exit status)."""
    from bench import effectiveness_bench as eb

    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("RESEARCHLOOP_MODEL", "fake-model")
    monkeypatch.setenv("RESEARCHLOOP_EDIT_FORMAT", "whole")
    monkeypatch.delenv("FROM_RECORD", raising=False)
    out, work, results = tmp_path / "effectiveness.json", tmp_path / "work", tmp_path / "effectiveness.md"
    rc = eb.main(["--topics", TOPIC, "--rounds", "1", "--parallel", "1", "--out", str(out), "--work", str(work),
                  "--page", str(results)])
    return json.loads(out.read_text()), work, fake_llm, rc, results


def test_bench_summary_matches_the_records(bench_run):
    from bench import effectiveness_bench as eb
    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import Feedback, FilteredIdea, Patch, RunResult

    rec, work, fake, rc, results = bench_run
    assert rc == 0 and rec["complete"], rec["topics"][0]["run"]["output_tail"]
    assert rec["model"] == "fake-model" and rec["rounds"] == 1 and "2-core shared VM" in rec["machine"]
    [t] = rec["topics"]
    assert t["topic"] == TOPIC and t["held_out"] and t["run"]["exit_code"] == 0
    assert t["stop_reason"] == "round budget spent (1/1)"

    # the bench's DAGSTER_HOME is a fresh one under its working folder; its records are what it summarised
    store = Store(work / "dagster_home" / "records")
    assert store.rounds("feedback_summary", TOPIC) == ["r1"]
    ideas = from_frame(store.read("filtered_ideas", TOPIC, "r1"), FilteredIdea)
    patches = from_frame(store.read("patched_code", TOPIC, "r1"), Patch)
    runs = from_frame(store.read("run_results", TOPIC, "r1"), RunResult)
    fb = from_frame(store.read("feedback_summary", TOPIC, "r1"), Feedback)
    [row] = t["rows"]
    assert row["proposed"] == len(ideas) and row["kept"] == sum(i.kept for i in ideas) == len(fb) == 3
    assert row["budget"] == 3 and row["full_budget"] is True
    assert row["implemented"] == sum(p.status == "ok" for p in patches) == 2  # fancy_kernel's patch never applied
    assert row["no_op"] == sum(p.status == "no_op" for p in patches) == 0 and row["no_op_share"] == 0
    assert row["ran"] == sum(r.status == "success" for r in runs) == 2  # negative_step; longer_training, repaired
    assert row["verified_improvements"] == sum(f.verdict == "improvement" for f in fb)
    assert row["verdicts"]["decline"] == 1 and row["verdicts"]["failed"] == 1  # negative_step; fancy_kernel
    assert row["improvements_vs_baseline"] == sum(f.baseline_verdict == "improvement" for f in fb)
    assert sum(row["improvements_by_source"].values()) == row["verified_improvements"]
    assert row["kept_by_source"] == {"ranking": 3}
    assert row["baseline"] == pytest.approx(fb[0].baseline_value)
    ran = [f for f in fb if f.metric_value is not None]
    best = max(ran, key=lambda f: f.metric_value)
    assert row["best_idea"] == best.idea_id and row["best_idea_value"] == pytest.approx(best.metric_value)
    assert row["best_so_far"] is not None and row["best_so_far_value"] is not None  # best_code after r1

    # tokens: the round's stages' metadata, which per-idea accounting adds up to (own + shared)
    assert row["tokens"] == pytest.approx(sum(f.tokens + f.shared_tokens for f in fb)) and row["tokens"] > 0
    assert row["tokens_per_idea"] == round(row["tokens"] / 3)
    # timing: every LLM call of the round logged once (cached or not), as the metadata counts them
    assert row["llm_calls_logged"] == row["llm_calls"] > 0
    assert row["experiment_runs_logged"] >= 3  # dry runs of the two patches, the runs and the repair
    assert row["wall_s"] > 0 and row["llm_s"] > 0 and row["experiment_s"] > 0
    assert row["llm_s"] + row["experiment_s"] >= row["wall_s"] - row["overhead_s"] - 0.2  # overlaps count once
    assert 0 <= row["overhead_s"] <= row["wall_s"] and row["wall_s_per_idea"] == round(row["wall_s"] / 3, 1)

    # the raw summary names every idea, patch, run and verdict by id
    [raw] = t["rounds"]
    assert [i["idea_id"] for i in raw["ideas"]] == [i.idea_id for i in ideas]
    assert {p["idea_id"]: p["status"] for p in raw["patches"]} == {p.idea_id: p.status for p in patches}
    assert {v["idea_id"]: v["verdict"] for v in raw["verdicts"]} == {f.idea_id: f.verdict for f in fb}
    fixed = next(r for r in raw["runs"] if r["idea_id"] == f"{TOPIC}/r1/longer_training_r1")
    assert len(fixed["attempts"]) == 2 and "NameError" in fixed["attempts"][0]["error"]
    assert raw["best_code"]["round"] == "r1" and "code" not in raw["best_code"]
    secs = raw["idea_seconds"][fixed["idea_id"]]
    assert secs["experiment_s"] >= sum(a["duration_s"] for a in fixed["attempts"]) - 1.0  # its own runs
    assert secs["llm_s"] > 0  # its plan, patch and repair calls

    # goals over the topic's rounds, and the section rendered from the record into the page named
    assert t["goals"]["no_op_goal_met"] and t["goals"]["full_budget_every_round"]
    assert t["goals"]["improvement_reached"] == bool(row["verified_improvements"])
    text = results.read_text()
    assert "<!-- bench:effectiveness:begin -->" in text and eb.render(rec) in text
    assert f"| {TOPIC} | r1 | {len(ideas)} (0) | 3 / 3 | 2 | 0 | 2 |" in text
    from tests.support.bench_records import section_problems

    head, _, rest = eb.render(rec).partition("\n")
    # the record a real run commits is bench/records/effectiveness.json; in a test it is elsewhere
    assert [p for p in section_problems(head, rest) if "effectiveness.json" not in p] == []
    assert "held-out" in rest and "fake-model" in rest
    # what a person learnt from the run's records lives in the record too, under the tables
    noted = eb.render({**rec, "notes": ["r1's one improvement came from the tuning source."]})
    assert noted.endswith("\n\n- r1's one improvement came from the tuning source.") and "- r1's" not in rest


def test_counts_on_hand_made_records():
    """A dead-code draft is a no-op patch (not implemented); refill proposals count as proposed;
    a round short of kept ideas did not test its budget."""
    from bench.effectiveness_bench import summarise_round
    from schemas.records import Draft, FilteredIdea, Patch

    def idea(name, kept, proposal=0, drop="near copy", papers=()):
        return FilteredIdea(idea_id=f"t/r1/{name}", topic="t", round="r1", name=name, title=name, experiment="x",
                            summary="x", max_similarity=0.1, independent=True, kept=kept, proposal=proposal,
                            drop_reason=None if kept else drop, inspired_by_papers=list(papers))

    dead = Draft(index=0, edit_format="functions", status="no_op", reason="the edit only adds code that never runs")
    recs = {"ideas": [idea("a", True, papers=["p1"]), idea("b", False), idea("c", True, proposal=1),
                      idea("d", False, proposal=1, drop="repeats t/r0/d ('d', failed)")], "plans": [],
            "patches": [Patch(idea_id="t/r1/a", edit_format="functions", status="no_op", reason=dead.reason,
                              drafts=[dead]),
                        Patch(idea_id="t/r1/c", edit_format="functions", status="ok", diff="-x\n+y",
                              drafts=[Draft(index=0, edit_format="functions", status="ok", diff="-x\n+y")])],
            "runs": [], "feedback": [], "best": []}
    row, raw = summarise_round(recs, topic="t", rk="r1", goal="maximize", budget=3)
    counts = ("proposed", "proposed_refill", "proposals", "kept", "kept_refill")
    assert tuple(row[k] for k in counts) == (4, 2, 2, 2, 1)
    assert (row["kept_citing_papers"], row["dropped_as_repeats"]) == (1, 1)
    assert (row["implemented"], row["no_op"], row["no_op_dead_code"], row["no_op_share"]) == (1, 1, 1, 0.5)
    assert (row["drafts"], row["drafts_no_op"]) == (2, 1)
    assert row["full_budget"] is False and row["verified_improvements"] == 0 and row["best_idea"] is None
    assert [p["drafts"][0]["status"] for p in raw["patches"]] == ["no_op", "ok"]


def test_the_kept_llm_ideas_that_reach_a_metric_or_apply_a_card_are_counted_apart_from_tuning():
    from bench.effectiveness_bench import summarise_round, topic_goals
    from schemas.records import Feedback, FilteredIdea, RunResult

    def idea(name, source, card=None):
        return FilteredIdea(idea_id=f"t/r1/{name}", topic="t", round="r1", name=name, title=name, experiment="x",
                            summary="x", max_similarity=0.1, independent=True, kept=True, source=source,
                            method_card=card)

    ideas = [idea("boost", "ranking", "chen2016xgboost"), idea("plain", "ranking"), idea("move", "tuning"),
             idea("chain", "chains", "grinsztajn2022why")]
    runs = [RunResult(idea_id="t/r1/boost", status="success", metric_value=0.9),
            RunResult(idea_id="t/r1/plain", status="failed", reason="KeyError"),
            RunResult(idea_id="t/r1/move", status="success", metric_value=0.8),
            RunResult(idea_id="t/r1/chain", status="success", metric_value=0.7)]
    def won(name, value):
        return Feedback(idea_id=f"t/r1/{name}", name=name, title=name, summary="s", verdict="improvement",
                        reason="r", metric_value=value, baseline_value=0.5, effective=True)

    fb = [won("boost", 0.9), won("move", 0.8)]
    recs = {"ideas": ideas, "plans": [], "patches": [], "runs": runs, "feedback": fb, "best": []}
    row, raw = summarise_round(recs, topic="t", rk="r1", goal="maximize", budget=4)
    assert (row["kept_llm"], row["kept_llm_ran"], row["kept_llm_card"], row["improvements_llm"]) == (3, 2, 2, 1)
    assert row["improvements_llm_same_compute"] == 1  # no run time known: not flagged
    # an LLM win whose run took twice the reference's is counted apart (more compute in disguise)
    longer = [fb[0].model_copy(update={"compute_ratio": 2.0}), fb[1]]
    row2, raw2 = summarise_round({**recs, "feedback": longer}, topic="t", rk="r1", goal="maximize", budget=4)
    assert (row2["improvements_llm"], row2["improvements_llm_same_compute"]) == (1, 0)
    assert raw2["verdicts"][0]["compute_ratio"] == 2.0
    assert raw["ideas"][0]["method_card"] == "chen2016xgboost"
    g = topic_goals([row, {**row, "kept_llm": 1, "kept_llm_ran": 0, "kept_llm_card": 0}], 2)
    assert (g["kept_llm"], g["llm_ran_share"], g["llm_card_share"], g["improvements_llm"]) == (4, 0.5, 0.5, 2)
    assert topic_goals([{**row, "kept_llm": 0, "kept_llm_ran": 0, "kept_llm_card": 0}], 1)["llm_ran_share"] is None


def test_covered_seconds_counts_overlaps_once():
    spans = [{"start": 0.0, "seconds": 4.0}, {"start": 2.0, "seconds": 4.0}, {"start": 10.0, "seconds": 1.0},
             {"start": 20.0, "seconds": 5.0}]
    assert covered_seconds(spans, 0.0, 100.0) == pytest.approx(6.0 + 1.0 + 5.0)
    assert covered_seconds(spans, 3.0, 22.0) == pytest.approx(3.0 + 1.0 + 2.0)  # clipped to the window
    assert covered_seconds([], 0.0, 10.0) == 0.0


def test_records_of_topics_run_side_by_side_merge_into_one():
    from bench.effectiveness_bench import merge_records

    def rec(topic, complete, wall, date="2026-11-26"):
        return {"script": "bench/effectiveness_bench.py", "date": date, "machine": "m", "rounds": 3, "model": "q",
                "work": f"/tmp/{topic}", "complete": complete, "wall_s": wall, "topics": [{"topic": topic}]}

    m = merge_records([rec("a", True, 10.0), rec("b", False, 30.0, "2026-11-27")])
    assert [t["topic"] for t in m["topics"]] == ["a", "b"] and m["complete"] is False
    assert (m["wall_s"], m["date"], m["work"], m["merged_from"]) == (30.0, "2026-11-27", "/tmp/a, /tmp/b", 2)
    with pytest.raises(ValueError, match="different rounds or models"):
        merge_records([rec("a", True, 1.0), {**rec("b", True, 1.0), "rounds": 2}])


def test_a_record_written_elsewhere_gets_its_own_named_section(tmp_path, monkeypatch):
    """--section/--title: a run on other topics (the probe topics) renders into its own section,
    naming its own record, and keeps the heading in the record for later re-renders."""
    import json
    import shutil

    from bench import effectiveness_bench as eb
    from bench.common import RECORDS

    out = tmp_path / "probe.json"
    shutil.copy(RECORDS / "effectiveness.json", out)
    results = tmp_path / "effectiveness.md"
    results.write_text("# results\n")
    monkeypatch.setenv("FROM_RECORD", "1")
    eb.main(["--out", str(out), "--section", "effectiveness_probe", "--title", "Probe loops",
             "--page", str(results)])
    text = results.read_text()
    assert "<!-- bench:effectiveness_probe:begin -->" in text and "## Probe loops" in text
    assert f"- Record: `{out}`" in text and "<!-- bench:effectiveness:begin -->" not in text
    assert json.loads(out.read_text())["title"] == "Probe loops"
