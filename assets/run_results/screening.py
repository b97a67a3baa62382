"""Which of an idea's drafts get full runs, and which one is the idea's result.

The rule (successive halving with two rungs, the second of size `budget.promote`):

1. Rung 0, only when the topic declares `screen:` and the idea has more viable drafts than
   `budget.promote` (with no more, every draft may get its full run and a short run would only
   add cost): every viable draft runs the short command once (seed 0, no repairs). A draft whose short run
   fails or leaves the metric out drops out; the others are ranked by their metric (ties: the
   cheap order, assets/editing/drafts.py `cheap_order`).
2. Rung 1: full runs (with the repair search) go down that ranking until `budget.promote` drafts
   have succeeded or the ranking ends. If no draft passed the screen, the first draft in cheap
   order still gets its full run: its repairs may fix what the short run hit, so screening never
   leaves an idea with fewer runs than no screening would.
   Without `screen:` (or with no more viable drafts than `promote`) the ranking is the cheap
   order itself: the full runs stop at the first success when promote = 1.
   On the ray backend the screen runs go together and the full runs go in waves (`next_wave`):
   each wave submits the next `promote` minus successes so far drafts at once.
3. The idea's result is the successful full run with the best metric (ties: the earlier in the
   ranking); only it repeats its seeds (assets/run_results/seeds.py `repeat_seeds`). With
   no success, the result is the first full run's failure.

Full runs cost `promote` (plus one per draft that fails its full run) instead of one per draft;
the screen costs one short run per viable draft. A short run costs more than its share of the
epochs (loading the data and scoring the test set do not shrink) and may rank drafts unlike the full
runs (the image topic's measurement: bench/records/screen.json), so such a topic promotes more
than one draft."""
from __future__ import annotations

from schemas.records import DraftRun

RULE_SCREENED = "screened: best short-run metric first, full runs until {promote} succeeded, best full metric kept"
RULE_CHEAP = "cheap order (dry run passed, then order asked), full runs until {promote} succeeded, best metric kept"


def better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "maximize" else a < b


def screened_order(cheap: list[int], runs: dict[int, DraftRun], goal: str) -> list[int]:
    """The drafts that passed the short run, best metric first (ties: cheap order)."""
    passed = [i for i in cheap if runs[i].screen_status == "success" and runs[i].screen_value is not None]
    sign = -1.0 if goal == "maximize" else 1.0
    return sorted(passed, key=lambda i: (sign * runs[i].screen_value, cheap.index(i)))


def full_run_order(cheap: list[int], runs: dict[int, DraftRun] | None, goal: str) -> list[int]:
    """Who may get a full run, in order: the cheap order without screening (`runs` None); with
    it, the drafts that passed ranked by the short run, or the cheap order's first when none did."""
    if runs is None:
        return list(cheap)
    return screened_order(cheap, runs, goal) or cheap[:1]


def enough(runs: dict[int, DraftRun], promote: int) -> bool:
    """Stop giving full runs: `promote` drafts have succeeded."""
    return sum(r.status == "success" for r in runs.values()) >= promote


def next_wave(order: list[int], runs: dict[int, DraftRun], promote: int, together: bool = False) -> list[int]:
    """The drafts of `order` whose full runs go next: none once `enough`; else the next ones not
    yet promoted, one (`together` False: one after the other) or as many as successes are still
    missing, at least one (`together`: submitted at once, the ray backend). The sequential path
    would run every draft of such a wave too (even if all of them succeed, it needs that many),
    so waves run exactly the drafts it runs, only sooner."""
    if enough(runs, promote):
        return []
    size = max(1, promote - sum(r.status == "success" for r in runs.values())) if together else 1
    return [i for i in order if not runs[i].promoted][:size]


def pick_best(order: list[int], runs: dict[int, DraftRun], goal: str) -> int | None:
    """The successful full run with the best metric (ties: earlier in `order`); None: none succeeded."""
    best = None
    for i in order:
        r = runs[i]
        if r.status != "success" or r.metric_value is None:
            continue
        if best is None or better(r.metric_value, runs[best].metric_value, goal):
            best = i
    return best
