"""How often the verdict rule calls a change that does nothing an improvement, and how often it
still finds a change that really helps a little.

Null ideas are patches that change nothing but the random stream of the experiment: half of
them offset the torch seed (`torch.manual_seed(args.seed + 1000 * k)`), half draw and discard k
random numbers right after seeding. True small improvements are one real change (chosen by a
pilot, see --improvement) combined with the same seed offsets, so each trial sees new seeds.
Every trial goes through the loop's own code: `run_with_repair` (seed 0, sandboxed by the
Runner), `repeat_seeds` (seeds 1..n-1 only when seed 0 beats the baseline's mean) and
`judge_seeds` against the baseline's memoised seeds (run once, shared by all trials).

Writes bench/null_results.json (every seed value and verdict, rewritten after each trial, so
a killed run resumes from the runs memoised under dagster_home/bench/null/) and the section
"verdicts" of bench/results/null.md.

    nice -n 10 .venv/bin/python -m bench.null_bench [--nulls 24] [--improvements 10] [--improvement ensemble2]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

from assets.run_results.repair_search import run_with_repair
from assets.run_results.seeds import repeat_seeds
from assets.shared.verdicts import ALPHA, judge, judge_seeds, seed_summary
from bench.common import ROOT, machine, provenance, today, write_section
from resources.paths import under_home
from resources.runner import Runner
from schemas.topic import load_topic

TOPIC = "sentiment_classification"
RECORD = ROOT / "bench" / "null_results.json"
SEED_LINE = "torch.manual_seed(args.seed)\n"

# real changes a pilot may pick from (name -> (old, new) in the reference file)
IMPROVEMENTS = {
    "ensemble2": ("(one model)", "(two models trained in turn, softmax averaged)"),
    "lr1e-2": ("LR = 5e-3", "LR = 1e-2"),
    "epochs5": ("EPOCHS = 4\n", "EPOCHS = 5\n"),
    "dropout0.5": ("DROPOUT = 0.3", "DROPOUT = 0.5"),
    "weight_decay": ("lr=LR)", "lr=LR, weight_decay=1e-5)"),
    "min_count1": ("MIN_COUNT = 2 ", "MIN_COUNT = 1 "),
}


def null_patch(code: str, k: int) -> tuple[str, str]:
    """(kind, code) of null idea k: only the random stream differs from the reference."""
    assert code.count(SEED_LINE) == 1
    if k % 2:
        return "seed_offset", code.replace(SEED_LINE, f"torch.manual_seed(args.seed + 1000 * {k})\n")
    return "discard_draws", code.replace(SEED_LINE, SEED_LINE + f"torch.rand({k})  # drawn and discarded\n")


def ensemble(code: str, members: int = 2) -> str:
    """The reference with `members` models trained one after the other (each its own draw of
    the random stream) whose softmax outputs are averaged at test time."""
    start = code.index("model = BagOfWords(len(vocab))\n")
    end = code.index("train_time = time.time() - t0\n")
    block = code[start:end].replace("t0 = time.time()\n", "")
    assert "t0 = time.time()" not in block and code.count("t0 = time.time()\n") == 1
    loop = (f"t0 = time.time()\nmodels = []\nfor member in range({members}):  # an ensemble, averaged at test time\n"
            + "".join(("    " + ln if ln.strip() else ln) for ln in block.splitlines(keepends=True))
            + "    models.append(model)\n")
    out = code[:start] + loop + code[end:]
    old_eval = ("model.eval()\nwith torch.no_grad():\n"
                "    pred = torch.cat([model(x_test[i:i + 500]).argmax(1) for i in range(0, n_test, 500)])\n")
    new_eval = ("for model in models:\n    model.eval()\nwith torch.no_grad():\n"
                "    pred = torch.cat([sum(F.softmax(m(x_test[i:i + 500]), 1) for m in models).argmax(1)\n"
                "                      for i in range(0, n_test, 500)])\n")
    assert out.count(old_eval) == 1
    return out.replace(old_eval, new_eval)


def improved_patch(code: str, name: str, k: int) -> str:
    if name == "ensemble2":
        code = ensemble(code, 2)
    else:
        old, new = IMPROVEMENTS[name]
        assert code.count(old) == 1, name
        code = code.replace(old, new)
    return code.replace(SEED_LINE, f"torch.manual_seed(args.seed + 1000 * {k})\n")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nulls", type=int, default=24)
    ap.add_argument("--improvements", type=int, default=10)
    ap.add_argument("--improvement", default="ensemble2", choices=sorted(IMPROVEMENTS))
    ap.add_argument("--no-write", action="store_true", help="do not touch the page")
    ap.add_argument("--report-only", action="store_true", help="rewrite the section from the record")
    args = ap.parse_args()
    if args.report_only:
        write_section("verdicts", report(json.loads(RECORD.read_text())), "null")
        return 0

    spec = load_topic(ROOT / "experiments" / TOPIC)
    runner = Runner()
    work = under_home("bench", "null")
    ref = spec.code_path.read_text()
    goal, tol = spec.metric.goal, spec.metric.tolerance
    t0 = time.time()
    runs = {"n": 0}
    # earlier invocations of this bench (their runs are memoised and reused here)
    before = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    earlier = before.get("invocations", [])

    def log(msg: str) -> None:
        if "reusing" not in msg and "attempt 1:" in msg:
            runs["n"] += 1
        print(f"[{time.time() - t0:6.0f}s] {msg}", flush=True)

    base = run_with_repair(spec, ref, runner=runner, workdir=work / "baseline", idea_id="baseline", title="baseline",
                           log=log)
    base = repeat_seeds(spec, base, runner, work / "baseline", log=log, gate=False)
    assert base.status == "success", base.reason
    base_mean = seed_summary(base.seed_values)[0]
    trials = []

    def trial(group: str, name: str, kind: str, code: str) -> None:
        first = run_with_repair(spec, code, runner=runner, workdir=work / name, idea_id=name, title=name, log=log)
        r = repeat_seeds(spec, first, runner, work / name, log=log, reference=base_mean)
        row = {"group": group, "name": name, "kind": kind, "status": r.status, "reason": r.reason,
               "seed_values": r.seed_values}
        if r.status == "success":
            verdict, reason, c = judge_seeds(r.seed_values, base.seed_values, goal, tol)
            row.update(verdict=verdict, reason=reason, n_seeds=c.n_idea, mean_diff=c.mean_diff, ci_low=c.ci_low,
                       ci_high=c.ci_high, p_value=c.p_better, test=c.test,
                       # the earlier rule: seed 0 against the baseline's seed 0, tolerance only
                       old_rule_verdict=judge(r.seed_values[0], base.seed_values[0], goal, tol)[0])
        trials.append(row)
        save()

    def save() -> None:
        RECORD.write_text(json.dumps({
            "topic": TOPIC, "date": today(), "machine": machine(), "seeds": spec.budget.seeds, "alpha": ALPHA,
            "tolerance": tol, "improvement": args.improvement, "improvement_change": IMPROVEMENTS[args.improvement],
            "baseline_seed_values": base.seed_values, "baseline_mean": base_mean,
            "invocations": [*earlier, {"date": today(), "argv": sys.argv[1:], "new_experiment_runs": runs["n"],
                                       "wall_s": round(time.time() - t0)}],
            "trials": trials, **({"pilot": before["pilot"]} if "pilot" in before else {})}, indent=1) + "\n")

    for k in range(1, args.nulls + 1):
        kind, code = null_patch(ref, k)
        trial("null", f"null-{k:02d}", kind, code)
    for k in range(1, args.improvements + 1):
        trial("improvement", f"{args.improvement}-{k:02d}", args.improvement,
              improved_patch(ref, args.improvement, 100 + k))
    save()
    if not args.no_write:
        write_section("verdicts", report(json.loads(RECORD.read_text())), "null")
    return 0


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def sd(xs: list[float]) -> float:
    return math.sqrt(sum((x - mean(xs)) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")


def fmt(v: float | None) -> str:
    return "" if v is None else f"{v:+.4f}"


def report(rec: dict) -> str:
    """The section "verdicts" from the record."""
    nulls = [t for t in rec["trials"] if t["group"] == "null" and t["status"] == "success"]
    imps = [t for t in rec["trials"] if t["group"] == "improvement" and t["status"] == "success"]
    fi = sum(t["verdict"] == "improvement" for t in nulls)
    fd, old_fd = sum(t["verdict"] == "decline" for t in nulls), sum(t["old_rule_verdict"] == "decline" for t in nulls)
    n_runs = len(rec["baseline_seed_values"]) + sum(len(t["seed_values"]) for t in rec["trials"])
    pilot_variants = {r["variant"] for r in rec.get("pilot", {}).get("runs", [])} - {"base"}
    old_fi = sum(t["old_rule_verdict"] == "improvement" for t in nulls)
    det = sum(t["verdict"] == "improvement" for t in imps)
    old_det = sum(t["old_rule_verdict"] == "improvement" for t in imps)
    lo, hi = wilson(fi, len(nulls))
    dlo, dhi = wilson(det, len(imps))
    repeated = sum(t["n_seeds"] > 1 for t in nulls)
    # the change's true effect: every trial's seed 0 (a fresh stream, run whatever it gave)
    null0, imp0 = [t["seed_values"][0] for t in nulls], [t["seed_values"][0] for t in imps]
    old, new = rec["improvement_change"]
    intro = (f"Topic `{rec['topic']}` (shipped; accuracy, tolerance {rec['tolerance']:g}), the default rule: "
             f"{rec['seeds']} seeds on each side for candidates whose seed 0 beats the baseline's mean, Welch's t-test "
             f"one-sided at alpha {rec['alpha']:g} and mean difference > tolerance "
             "(`assets/shared/verdicts.py`). Every run sandboxed by the Runner through the loop's own "
             "`run_with_repair` / `repeat_seeds`; the baseline's seeds "
             f"{', '.join(f'{v:.4f}' for v in rec['baseline_seed_values'])} (mean {rec['baseline_mean']:.4f}) are run "
             f"once and shared by every trial. {n_runs} experiment runs (the record's seed values), "
             f"{sum(i['wall_s'] for i in rec['invocations']) / 60:.0f} min wall over {len(rec['invocations'])} "
             "invocation(s) that reuse each other's memoised runs (`nice -n 10` on the shared 2-core machine, "
             "beside other jobs). In-sample: the rule and the change were chosen on this topic; the change was "
             f"picked by a pilot of {len(pilot_variants)} single changes on 1-3 seeds each (the record's `pilot`: "
             "learning rate, epochs, width, dropout, weight decay, vocabulary, bigrams, ensembling), where only "
             "the ensemble looked better than the reference.")
    null_row = (f"| null (random stream only: {sum(t['kind'] == 'seed_offset' for t in nulls)} seed offsets, "
                f"{sum(t['kind'] == 'discard_draws' for t in nulls)} discarded draws) | {len(nulls)} | "
                f"**{fi}/{len(nulls)} = {fi / max(1, len(nulls)):.0%}** (false-improvement rate) | "
                f"{lo:.0%}-{hi:.0%} | {old_fi}/{len(nulls)} |")
    imp_row = (f"| real change `{old.strip()}` -> `{new.strip()}` (+ a new seed stream each) | {len(imps)} | "
               f"**{det}/{len(imps)} = {det / max(1, len(imps)):.0%}** (detected) | {dlo:.0%}-{dhi:.0%} | "
               f"{old_det}/{len(imps)} |")
    effect = (f"Null ideas repeated (seed 0 beat the baseline's mean): {repeated}/{len(nulls)}. Null ideas judged "
              f"*decline* (a false decline; one run against the baseline's seeds): {fd}/{len(nulls)} (old rule "
              f"{old_fd}/{len(nulls)}). The change's effect, "
              f"from the seed-0 runs (one per trial, none selected): {mean(imp0):.4f} ± {sd(imp0):.4f} "
              f"(n={len(imp0)}) against {mean(null0):.4f} ± {sd(null0):.4f} for the null ideas (n={len(null0)}), "
              f"a difference of {mean(imp0) - mean(null0):+.4f}. Reading: with {len(nulls)} null trials and none "
              f"judged an improvement, the 95% interval of the rate still reaches {hi:.0%}, so the point estimate "
              "meets the 5% goal but this sample cannot prove it; the old single-seed rule called "
              f"{old_fi}/{len(nulls)} null ideas improvements. The price is power: the real gain of about "
              f"{mean(imp0) - mean(null0):+.3f} (near the tolerance) is found {det} times in {len(imps)} "
              "with 3 seeds a side. "
              "The 3 baseline seeds are shared by every comparison, so their luck moves every verdict the same "
              "way (here they sit above the null ideas' mean, which makes improvements harder and declines easier).")
    lines = [
        "## Verdicts: false improvements on null ideas, detection of a small real gain", "",
        provenance("bench/null_bench.py", "bench/null_results.json", f"{rec['date']} on {rec['machine']}",
                   "in-sample: the rule and the real change were chosen on this topic"),
        "", intro, "",
        "| ideas | trials | judged improvement (new rule) | 95% interval (Wilson) | old rule (1 seed, tolerance) |",
        "|---|---|---|---|---|", null_row, imp_row, "", effect, "",
        "| trial | kind | seed values | verdict | mean diff | 95% interval | p | old rule |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in rec["trials"]:
        if t["status"] != "success":
            lines.append(f"| {t['name']} | {t['kind']} | | failed: {t['reason']} | | | | |")
            continue
        ci = "" if t["ci_low"] is None else f"[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]"
        lines.append(f"| {t['name']} | {t['kind']} | {', '.join(f'{v:.4f}' for v in t['seed_values'])} | "
                     f"{t['verdict']} | {fmt(t['mean_diff'])} | {ci} | "
                     f"{'' if t['p_value'] is None else format(t['p_value'], '.3g')} | {t['old_rule_verdict']} |")
    lines += ["", "Run: `nice -n 10 python -m bench null`."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
