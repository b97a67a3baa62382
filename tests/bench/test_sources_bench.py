"""bench/sources_bench.py without the LLM: the topic copies (one idea source, the Arena on, a
name of their own), the rating-gain correlation on known data, the per-source figures and the
section rendered from a hand-made record, and merging records of sources run side by side."""
from __future__ import annotations

import json

import pytest

from resources.paths import REPO_ROOT

TOPIC = REPO_ROOT / "experiments" / "image_classification"


@pytest.fixture
def sb(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    from bench import sources_bench

    return sources_bench


def test_topic_copy_sets_the_source_the_arena_and_its_own_name(sb, tmp_path):
    from schemas.topic import load_topic

    before = (TOPIC / "topic.yaml").read_text()
    for source, also, sources in (("scipip", (), ["scipip"]), ("ranking", ("tuning",), ["ranking", "tuning"])):
        folder = sb.topic_copy(TOPIC, source, tmp_path / "experiments", also)
        spec = load_topic(folder)
        assert folder == tmp_path / "experiments" / f"image_classification__{source}"
        assert spec.name == f"image_classification__{source}" != load_topic(TOPIC).name
        assert spec.ideation.sources == sources and spec.ideation.arena and not spec.ideation.brainstorm
        assert (folder / "experiment.py").read_text() == (TOPIC / "experiment.py").read_text()
        # everything else as the topic has it: same metric, budget and commands
        orig = load_topic(TOPIC)
        assert (spec.metric, spec.budget, spec.run) == (orig.metric, orig.budget, orig.run)
    sb.topic_copy(TOPIC, "scipip", tmp_path / "experiments")  # a second copy replaces the first
    assert (TOPIC / "topic.yaml").read_text() == before  # the shipped topic is untouched


def idea(n, rating=None, gain=None, kept=True, verdict="maintenance", rnd="r1", source="ranking"):
    return {"source": source, "idea_source": "literature", "round": rnd, "idea_id": f"t/{rnd}/i{n}",
            "kept": kept, "arena_rating": rating, "gain": gain, "baseline_gain": gain, "verdict": verdict,
            "baseline_gain_ci": None, "baseline_verdict": verdict}


def test_correlation_on_known_data_with_ties(sb):
    from scipy.stats import spearmanr

    ratings, gains = [1000.0, 1010.0, 1010.0, 1020.0, 1030.0], [0.01, 0.02, 0.03, 0.04, 0.05]
    ideas = [idea(k, r, g) for k, (r, g) in enumerate(zip(ratings, gains))]
    ideas += [idea(10, 990.0, None, verdict="failed"),  # rated, failed: left out, counted
              idea(11, None, 0.2),                       # kept but not rated (a refill)
              idea(12, 1100.0, 0.9, kept=False)]         # not kept: no gain, not counted
    c = sb.correlation(ideas)
    # ranks of the ratings 1, 2.5, 2.5, 4, 5 against 1..5: 9.5 / sqrt(9.5 * 10)
    assert c["rho"] == pytest.approx(9.5 / (9.5 * 10) ** 0.5, abs=1e-4)
    assert c["p_value"] == pytest.approx(spearmanr(ratings, gains).pvalue, abs=1e-4)
    assert (c["n"], c["kept"], c["rated"], c["unrated"], c["rated_without_gain"]) == (5, 7, 6, 1, 1)
    assert sb.correlation(ideas[:4])["rho"] is None and sb.correlation(ideas[:4])["note"] == "n too small"
    flat = sb.correlation([idea(k, 1000.0, k / 100) for k in range(6)])  # one rating for all: no ranking
    assert flat["rho"] is None and "equal" in flat["note"]
    anti = sb.correlation([idea(k, 1000.0 - k, k / 100) for k in range(6)])
    assert anti["rho"] == pytest.approx(-1.0)


def summary(source, goal="maximize", ratings=(1000.0, 1010.0, 990.0), deltas=(0.01, 0.03, None)):
    """A one-round effectiveness summary (summarise_topic's shape, the keys the bench reads)."""
    ids = [f"t__{source}/r1/i{k}" for k in range(len(ratings))]
    ideas = [{"idea_id": i, "title": i, "source": "literature", "proposal": 0, "kept": True, "drop_reason": None,
              "arena_rating": r, "arena_rank": None} for i, r in zip(ids, ratings)]
    ideas.append({"idea_id": f"t__{source}/r1/x", "title": "x", "source": "literature", "proposal": 0,
                  "kept": False, "drop_reason": "near copy", "arena_rating": 980.0, "arena_rank": 4})
    verdicts = [{"idea_id": i, "verdict": "failed" if d is None else "improvement" if d > 0.02 else "maintenance",
                 "delta": d, "baseline_delta": d, "baseline_ci": [None, None] if d is None else [d - 0.01, d + 0.01],
                 "baseline_verdict": "failed" if d is None else "maintenance", "metric_value": None}
                for i, d in zip(ids, deltas)]
    row = {"round": "r1", "proposed": 4, "kept": 3, "implemented": 2, "no_op": 1, "ran": 2,
           "verified_improvements": 1, "improvements_vs_baseline": 0, "tokens": 9000, "wall_s": 900.0}
    return {"topic": f"t__{source}", "goal": goal, "rows": [row],
            "rounds": [{"round": "r1", "ideas": ideas, "verdicts": verdicts,
                        "patches": [{"idea_id": i, "status": "ok"} for i in ids[:2]],
                        "runs": [{"idea_id": ids[0], "status": "success", "metric_value": 0.9,
                                  "attempts": [{"exit_code": 0, "error": None}]},
                                 {"idea_id": ids[1], "status": "success", "metric_value": 0.91,
                                  "attempts": [{"exit_code": 1, "error": "NameError: x"},
                                               {"exit_code": 0, "error": None}]}]}]}


def test_idea_rows_turn_deltas_into_gains(sb):
    rows = sb.idea_rows(summary("ranking", goal="minimize"), "ranking")
    first = rows[0]
    assert first["gain"] == pytest.approx(-0.01) and first["baseline_gain_ci"] == pytest.approx([-0.02, 0.0])
    assert first["patch"] == "ok" and first["ran"] and first["arena_rating"] == 1000.0
    assert rows[2]["gain"] is None and rows[2]["verdict"] == "failed" and not rows[2]["ran"]
    assert rows[3]["kept"] is False and rows[3]["verdict"] is None  # a dropped idea has no verdict


def record(sb, sources=("ranking", "brainstorm"), rounds=1):
    rec = {"script": sb.SCRIPT, "date": "2026-11-28", "machine": "2-core shared VM: 2 cores (test), 8 GiB",
           "rounds": rounds, "model": "qwen-test", "topic": "image_classification", "held_out": False,
           "in_sample_because": "its screen run was tuned", "metric": "accuracy", "goal": "maximize", "budget": 3,
           "sources_asked": list(sources), "also": [], "work": "/tmp/w", "wall_s": 10.0, "sources": []}
    for s in sources:
        summ = summary(s)
        rec["sources"].append({"source": s, "topic": f"t__{s}", "ideas": sb.idea_rows(summ, s),
                               "effectiveness": summ})
    return sb.finish(rec)


def test_render_has_a_row_per_source_and_the_correlation(sb):
    from tests.support.bench_records import section_problems

    rec = record(sb)
    g = rec["sources"][0]["figures"]
    assert (g["proposed"], g["kept"], g["implemented"], g["ran"], g["failed"]) == (4, 3, 2, 2, 1)
    assert (g["tokens_per_idea"], g["wall_s_per_idea"], g["arena_rounds"]) == (3000, 300.0, 1)
    assert g["best_gain"] == pytest.approx(0.03) and g["best_gain_ci"] == pytest.approx([0.02, 0.04])
    assert g["correlation"]["n"] == 2 and g["correlation"]["note"] == "n too small"
    assert rec["pooled"]["n"] == 4 and rec["complete"]

    body = sb.render(rec)
    assert "| ranking | 1/1 | 4 / 3 | 2 (1) | 2 | 1 (0) | +0.0300 [+0.0200, +0.0400] | 3000 | 300 | 1 | 3/3 | " \
           "n too small (n = 2) | 1/2 / 2/2 |" in body
    assert g["rd2bench"] == {"with_run": 2, "executed_first": 1, "format_ok": 2}
    assert "| brainstorm | 1/1 |" in body
    assert "- Pooled over the sources: Spearman n too small (n = 4)" in body
    assert "in-sample (image_classification: its screen run was tuned)" in body
    assert "No round had an Arena tournament" not in body

    # five pairs and more: rho with n and p
    big = record(sb, sources=("ranking", "brainstorm", "chains"))
    assert big["pooled"]["n"] == 6 and big["pooled"]["rho"] == pytest.approx(1.0)
    assert "- Pooled over the sources: Spearman +1.00 (n = 6, p = " in sb.render(big)

    head, _, rest = body.partition("\n")
    assert head.startswith("## Idea sources")
    # the record a real run commits is bench/records/sources.json; in a test it may not exist yet
    assert [p for p in section_problems(head, rest) if "sources.json" not in p] == []

    for s in rec["sources"]:  # no tournament anywhere: the section says so
        for i in s["ideas"]:
            i["arena_rating"] = None
    assert "No round had an Arena tournament" in sb.render(sb.finish(rec))


def test_records_of_sources_run_side_by_side_merge(sb):
    a, b = record(sb, sources=("ranking",)), record(sb, sources=("scipip",))
    m = sb.merge_records([a, b])
    assert [s["source"] for s in m["sources"]] == ["ranking", "scipip"] and m["merged_from"] == 2
    assert m["sources_asked"] == ["ranking", "scipip"] and m["complete"] and m["pooled"]["n"] == 4
    with pytest.raises(ValueError, match="cannot be merged"):
        sb.merge_records([a, {**b, "rounds": 3}])
    assert not sb.finish({**a, "rounds": 3})["complete"]  # a source short of its rounds


def test_merge_from_the_command_line_keeps_notes_in_record_and_section(sb, tmp_path):
    """`--merge a,b --note ...`: one record with the notes, the section written where --page says."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(record(sb, sources=("ranking",))))
    b.write_text(json.dumps(record(sb, sources=("chains",))))
    out, results = tmp_path / "sources.json", tmp_path / "sources.md"
    results.write_text("# results\n")
    assert sb.main(["--merge", f"{a},{b}", "--out", str(out), "--page", str(results),
                    "--note", "scipip and brainstorm: not run yet"]) == 0
    rec = json.loads(out.read_text())
    assert [s["source"] for s in rec["sources"]] == ["ranking", "chains"]
    assert rec["notes"] == ["scipip and brainstorm: not run yet"]
    assert "- scipip and brainstorm: not run yet" in results.read_text()
