"""The second look's error rates (assets/feedback_summary/verdicts.py), simulated through the
loop's own rule: how often an idea that changes nothing is called an improvement, and how often
an idea better by d seed standard deviations is, with one look and with the second look.

Each simulated idea draws 2n per-seed values for itself and for the reference code from normal
noise (sd 1; the idea's mean d), n = 3 as the shipped topics. As in a round: the idea's seed 0
must beat the mean of the reference's first n seeds to be repeated (experimenting.repeat_seeds);
the first look is `judge_seeds` on n vs n at ALPHA; a candidate that `second_look` accepts is
judged on 2n vs 2n at ALPHA_SECOND_LOOK. Tolerance 0 (the worst case for false improvements).
No LLM, no experiment: a minute on one core.

    .venv/bin/python -m bench.second_look_bench [--ideas 20000] [--seed 0]
"""
from __future__ import annotations

import argparse
import random

from assets.feedback_summary.verdicts import ALPHA, ALPHA_SECOND_LOOK, P_SECOND_LOOK, judge_seeds, second_look
from bench.common import machine, provenance, today, write_record, write_section

EFFECTS = [0.0, 0.5, 1.0, 1.5, 2.0]  # the idea's gain in seed standard deviations
N = 3


def one_idea(rng: random.Random, d: float, n: int = N) -> dict:
    idea = [rng.gauss(d, 1.0) for _ in range(2 * n)]
    ref = [rng.gauss(0.0, 1.0) for _ in range(2 * n)]
    if idea[0] <= sum(ref[:n]) / n:  # seed 0 did not beat the reference: not repeated, never an improvement
        return {"repeated": False, "first": False, "looked": False, "final": False}
    first = judge_seeds(idea[:n], ref[:n], "maximize", 0.0, alpha=ALPHA)[0] == "improvement"
    looked = not first and second_look(idea[:n], ref[:n], "maximize", 0.0, n)
    final = first or (looked and judge_seeds(idea, ref, "maximize", 0.0, alpha=ALPHA_SECOND_LOOK)[0] == "improvement")
    return {"repeated": True, "first": first, "looked": looked, "final": final}


def simulate(ideas: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for d in EFFECTS:
        outcomes = [one_idea(rng, d) for _ in range(ideas)]
        rows.append({"effect_sd": d, "ideas": ideas,
                     "one_look_improvements": sum(o["first"] for o in outcomes) / ideas,
                     "second_looks": sum(o["looked"] for o in outcomes) / ideas,
                     "improvements": sum(o["final"] for o in outcomes) / ideas})
    return rows


def report(record: dict) -> str:
    lines = ["## The second look (issue 14): error rates of the seed rule, simulated", "",
             provenance("bench/second_look_bench.py (make bench-second-look)", "bench/records/second_look.json",
                        f"{record['date']} on {record['machine']}",
                        "in-sample: a simulation (normal seed noise) on which the levels 0.3 and 0.02 were chosen"), "",
             f"{record['ideas']} simulated ideas per effect, {N} seeds a side at the first look, {2 * N} at the "
             f"second; "
             f"first look at {ALPHA}, a second look for p in [{ALPHA}, {P_SECOND_LOOK}) judged at {ALPHA_SECOND_LOOK}.",
             "", "| idea better by (seed sd) | improvement, one look | second looks run | improvement, with it |",
             "|---|---|---|---|"]
    for r in record["rows"]:
        lines.append(f"| {r['effect_sd']:g} | {r['one_look_improvements']:.3f} | {r['second_looks']:.3f} "
                     f"| {r['improvements']:.3f} |")
    null, real = record["rows"][0], [r["second_looks"] for r in record["rows"][1:]]
    lines += ["", f"With nothing to find (effect 0) the rule calls {null['improvements']:.1%} of ideas improvements "
              f"({null['one_look_improvements']:.1%} with one look); the cost is the extra seeds of the "
              f"{null['second_looks']:.1%} (no effect) to {min(real):.0%}-{max(real):.0%} (real effects) of ideas "
              "given a second look, plus the reference's extra seeds once per round."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ideas", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    record = {"date": today(), "machine": machine(), "ideas": a.ideas, "seed": a.seed, "seeds": N, "alpha": ALPHA,
              "p_second_look": P_SECOND_LOOK, "alpha_second_look": ALPHA_SECOND_LOOK,
              "rows": simulate(a.ideas, a.seed)}
    write_record("second_look", record)
    print(write_section("second_look", report(record)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
