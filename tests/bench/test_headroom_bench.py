"""bench/headroom_bench.py without running experiments: the neighbourhood is every one-knob move in
both directions and leaves the code's other literals alone; the section counts verdicts per topic and
names the best move in the topic's direction; --section and --title give a record its own section; the
committed records render to their committed sections."""
from __future__ import annotations

import json

import pytest

from bench import headroom_bench as hb
from bench.common import find_section
from resources.paths import REPO_ROOT

CODE = "SEED = 0\nEPOCHS = 4\nLR = 5e-3\nDROPOUT = 0.3\nN_TRAIN = 800\n"


def test_the_neighbourhood_is_every_knob_both_ways():
    from assets.ideas.tuning import apply_move

    *ms, pair = hb.neighbourhood(CODE)
    assert [(m.key, m.direction, m.new_text) for m in ms] == [
        ("EPOCHS", "up", "8"), ("EPOCHS", "down", "2"), ("LR", "up", "0.015"), ("LR", "down", "0.00167"),
        ("DROPOUT", "up", "0.5"), ("DROPOUT", "down", "0.1")]
    # then the compensating pair: the rate 3x slower, the training 3x longer, two lines change
    assert (pair.key, pair.new_text, pair.paired.key, pair.paired.new_text) == ("LR", "0.00167", "EPOCHS", "12")
    assert hb.apply_all(CODE, (pair,)) == CODE.replace("EPOCHS = 4", "EPOCHS = 12").replace("5e-3", "0.00167")
    for m in ms:  # one line changes, seeds and data sizes never
        changed = [(a, b) for a, b in zip(CODE.splitlines(), apply_move(CODE, m).splitlines()) if a != b]
        assert len(changed) == 1 and changed[0][0].startswith(m.key)
    assert hb.neighbourhood("ALPHAS = [0.1, 1.0]\nFOLDS = 5\n") == []  # no named knob: nothing to probe


def _move(key, new, verdict, delta):
    return {"key": key, "kind": "learning_rate", "direction": "up", "old": "1", "new": new, "status": "success",
            "error": "", "seed_values": [0.5, 0.6, 0.7], "verdict": verdict, "reason": f"{verdict} because",
            "delta": delta, "seconds": 1.0}


def test_section_counts_verdicts_and_names_the_best_move_in_the_goal_direction():
    rec = {"record": "bench/records/headroom.json", "date": "2026-11-27", "machine": "2 cores", "sample": "held-out",
           "topics": [
               {"topic": "up", "goal": "maximize", "wall_s": 3.0, "moves": [
                   _move("LR", "3", "improvement", 0.02), _move("LR", "0.3", "decline", -0.03),
                   _move("EPOCHS", "8", "maintenance", 0.001)]},
               {"topic": "down", "goal": "minimize", "wall_s": 2.0, "moves": [
                   _move("LR", "3", "decline", 0.02), _move("LR", "0.3", "improvement", -0.03),
                   {**_move("EPOCHS", "8", "failed", None), "status": "failed", "error": "boom", "reason": ""}]},
               {"topic": "none", "goal": "maximize", "wall_s": 1.0, "moves": []}]}
    text = hb.section(rec)
    assert "| up | 2 | 3 | 1 | 1 | 1 | 0 | LR 1 -> 3: +0.0200 (improvement) | - | 3.0 |" in text
    assert "| down | 2 | 3 | 1 | 0 | 1 | 1 | LR 1 -> 0.3: -0.0300 (improvement) | - | 2.0 |" in text
    assert "| none | 0 | 0 | 0 | 0 | 0 | 0 | - | - | 1.0 |" in text
    assert "| down | EPOCHS (learning_rate) | 1 -> 8 | 3 | - | failed | boom |" in text


def test_knobs_keep_only_the_named_ones():
    assert [(m.key, m.paired is not None) for m in hb.neighbourhood(CODE, {"LR"})] == [
        ("LR", False), ("LR", False), ("LR", True)]
    assert hb.neighbourhood(CODE, {"NOPE"}) == []


def test_pairs_join_moves_of_two_knobs_that_did_no_harm_largest_summed_gain_first():
    ms = hb.neighbourhood(CODE)  # EPOCHS up/down, LR up/down, DROPOUT up/down, the pair LR down + EPOCHS up
    rows = [_move(m.key, m.new_text, v, d) for m, (v, d) in zip(ms, [
        ("maintenance", 0.004), ("decline", -0.02), ("maintenance", 0.001), ("failed", None),
        ("maintenance", -0.003), ("improvement", 0.01), ("improvement", 0.05)])]  # a pair is never joined
    got = [(a.key, a.new_text, b.key, b.new_text) for a, b in hb.pairs_of(rows, ms, "maximize", 3)]
    # never two values of one knob, never a decline or a failure; EPOCHS 8 + DROPOUT 0.1 (0.014) first
    assert got == [("EPOCHS", "8", "DROPOUT", "0.1"), ("LR", "0.015", "DROPOUT", "0.1"),
                   ("EPOCHS", "8", "LR", "0.015")]
    assert hb.pairs_of(rows, ms, "maximize", 0) == []
    # minimising: the signs turn, EPOCHS 8 (+0.004) is now the worst of the three that did no harm
    low = [(a.new_text, b.new_text) for a, b in hb.pairs_of(rows, ms, "minimize", 1)]
    assert low == [("0.015", "0.5")]


def test_a_pair_with_a_swap_applies_the_swap_last():
    code = ("from sklearn.ensemble import RandomForestClassifier\n"
            "model = RandomForestClassifier(random_state=0)\n")
    ms = hb.neighbourhood(code)
    swap = next(m for m in ms if m.kind == "swap")
    more = next(m for m in ms if m.key == "RandomForestClassifier(n_estimators=)" and m.direction == "up")
    new = hb.apply_all(code, (swap, more))  # in either order
    assert new == hb.apply_all(code, (more, swap))
    assert "ExtraTreesClassifier(random_state=0, n_estimators=200)" in new
    with pytest.raises(ValueError):
        hb.apply_all(code, (more, more))  # the second finds the knob already moved


def test_a_pair_is_left_out_of_the_single_move_counts():
    rec = {"record": "r.json", "date": "d", "machine": "m", "sample": "s", "topics": [
        {"topic": "t", "goal": "maximize", "wall_s": 1.0, "moves": [
            _move("LR", "3", "maintenance", 0.001), _move("EPOCHS", "8", "maintenance", 0.002),
            {**_move("LR + EPOCHS", "3 + 8", "improvement", 0.01), "pair": True}]}]}
    text = hb.section(rec)
    assert "| t | 2 | 2 | 0 | 2 | 0 | 0 | EPOCHS 1 -> 8: +0.0020 (maintenance) | 1 / 1 | 1.0 |" in text
    assert "| t | LR + EPOCHS (learning_rate) | 1 -> 3 + 8 | 3 | +0.0100 | improvement |" in text


def test_section_and_title_name_a_records_own_section(tmp_path, monkeypatch):
    written = []
    monkeypatch.setattr(hb, "write_section", lambda name, body, page: written.append((name, body, page)) or body)
    part = tmp_path / "part.json"
    part.write_text(json.dumps({"topics": [{"topic": "t", "goal": "maximize", "wall_s": 1.0, "moves": []}]}))
    out = tmp_path / "probes.json"
    assert hb.main(["--merge", str(part), "--out", str(out), "--sample", "held-out"]) == 0
    assert written == []  # a record written elsewhere gets no section unless one is named
    assert hb.main(["--merge", str(part), "--out", str(out), "--sample", "held-out", "--section", "headroom_x",
                    "--title", "Headroom on x"]) == 0
    rec = json.loads(out.read_text())
    assert rec["title"] == "Headroom on x" and rec["record"] == str(out)
    assert [(n, p) for n, _, p in written] == [("headroom_x", "headroom")] and written[0][1] == hb.section(rec)
    assert written[0][1].startswith("## Headroom on x\n") and f"- Record: `{out}`" in written[0][1]
    assert hb.section_name(hb.RECORDS / "headroom.json") == "headroom" and hb.section_name(out) == ""
    assert hb.section({**rec, "title": ""}).startswith(f"## {hb.TITLE}\n")


@pytest.mark.parametrize("name", ["headroom", "headroom_probes", "headroom_pairs", "headroom_lr"])
def test_the_committed_record_renders_to_the_committed_section(name):
    rec = json.loads((REPO_ROOT / "bench" / "records" / f"{name}.json").read_text())
    page, body = find_section(name)
    assert page.name == "headroom.md" and body == hb.section(rec).strip()
    for t in rec["topics"]:  # every move was judged against the baseline's seeds, or failed with its error
        assert all(m["verdict"] == "failed" and m["error"] or len(m["seed_values"]) == t["seeds"] for m in t["moves"])
