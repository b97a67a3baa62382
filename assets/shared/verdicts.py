"""Improvement / maintenance / decline against the baseline (DOLPHIN 3.3), with repeated seeds
and a stated statistical test.

The rule (`compare_seeds`, `judge_seeds`): an idea is an *improvement* only when

* both sides ran at least two seeds (the topic's `budget.seeds`; candidates that did not beat
  the baseline on their first seed are not repeated and so cannot be improvements),
* Welch's t-test, one-sided in the topic's direction, on the per-seed values gives p < ALPHA
  (0.05), and
* the mean difference in the topic's direction exceeds the topic's `tolerance`.

A *decline* is the mirror image (the test in the other direction, and worse by more than the
tolerance; a single idea run against repeated baseline seeds is tested with the baseline's
variance, see `compare_seeds`); everything else is *maintenance*. With one run on each side
(`budget.seeds: 1`) no test is possible: the verdict then falls back to the tolerance alone
and says so. Every verdict records the seeds on each side, the mean difference, its 95 %
(Welch) interval, the p-value and the test's name.

A second look (`second_look`, topic.yaml `budget.second_look`, on by default): a candidate whose
n seeds came out better by more than the tolerance but not significant, with p < P_SECOND_LOOK,
runs n more seeds, and so does the reference code (the same seeds n..2n-1, once per
reference code); the verdict then tests all 2n against 2n at ALPHA_SECOND_LOOK. Looking
twice at the data raises the chance of a false improvement, so the second look's level is
stricter: with the first look's level and seed 0's gate, both looks together keep the rate of false improvements
near the first look's level while finding more real ones (simulated with normal seed noise: record
bench/records/second_look.json, section second_look in bench/results/archive.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.05          # one-sided level of the test
P_SECOND_LOOK = 0.3   # a better, not significant candidate with p below this gets a second look
ALPHA_SECOND_LOOK = 0.02  # the level of the test after the second look (both looks: 5 % overall)
CONFIDENCE = 0.95     # two-sided interval of the mean difference
EPS = 1e-9            # a difference of exactly the tolerance (up to float rounding) is not beyond it
# an improvement whose run took this many times the reference's is flagged: more compute (a longer
# training, a second pass over the data) may explain it rather than the idea
COMPUTE_FLAG = 1.5
# runs shorter than this are mostly interpreter start-up: their ratio says nothing about compute
COMPUTE_MIN_S = 5.0

WELCH = "welch_t_one_sided"
ONE_RUN = "t_one_run_vs_seeds"   # one value against repeated seeds, with those seeds' variance
NO_TEST = "none_one_run_each"


@dataclass(frozen=True)
class SeedComparison:
    """The idea's seed values against the baseline's. `mean_diff` and the interval are idea -
    baseline in the metric's own units; `p_better` / `p_worse` are one-sided p-values for "the
    idea is better / worse in the topic's direction" (None when no test is possible)."""
    n_idea: int
    n_base: int
    mean_idea: float
    mean_base: float
    mean_diff: float
    ci_low: float | None
    ci_high: float | None
    p_better: float | None
    p_worse: float | None
    test: str


def _finite(values) -> list[float]:
    return [f for v in values if (f := _number(v)) is not None]


def _var(vals: list[float]) -> float:
    if max(vals) == min(vals):  # exactly equal seeds (a deterministic run): no rounding noise
        return 0.0
    m = sum(vals) / len(vals)
    return sum((v - m) ** 2 for v in vals) / (len(vals) - 1)


def compare_seeds(idea: list[float], base: list[float], goal: str, confidence: float = CONFIDENCE) -> SeedComparison:
    """Welch's t-test of the two samples (unequal variances, Welch-Satterthwaite degrees of
    freedom) when both have >= 2 values; one value against >= 2 (either way round) uses the
    larger sample's variance for both sides (df = its n - 1); one value each: no test."""
    from scipy import stats  # lazy: scipy costs an import

    a, b = _finite(idea), _finite(base)
    if not a or not b:
        raise ValueError("compare_seeds needs at least one finite value on each side")
    na, nb = len(a), len(b)
    ma, mb = sum(a) / na, sum(b) / nb
    diff = round(ma - mb, 12)  # no float dust in the reasons
    sign = 1.0 if goal == "maximize" else -1.0
    if na >= 2 and nb >= 2:
        va, vb = _var(a) / na, _var(b) / nb
        se2 = va + vb
        df = se2 ** 2 / ((va ** 2 / (na - 1) if va else 0.0) + (vb ** 2 / (nb - 1) if vb else 0.0)) if se2 else math.inf
        test = WELCH
    elif na >= 2 or nb >= 2:
        s2 = _var(a if na >= 2 else b)
        se2 = s2 * (1 / na + 1 / nb)
        df = (max(na, nb) - 1)
        test = ONE_RUN
    else:
        return SeedComparison(na, nb, ma, mb, diff, None, None, None, None, NO_TEST)
    se = math.sqrt(se2)
    if se == 0.0:  # every seed gave the same value on both sides: the difference is exact
        gain = sign * diff
        p_better = 0.0 if gain > 0 else 1.0 if gain < 0 else 0.5
        return SeedComparison(na, nb, ma, mb, diff, diff, diff, p_better, 1.0 - p_better if gain else 0.5, test)
    t = sign * diff / se
    p_better, p_worse = float(stats.t.sf(t, df)), float(stats.t.cdf(t, df))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return SeedComparison(na, nb, ma, mb, diff, diff - half, diff + half, p_better, p_worse, test)


def judge_seeds(idea: list[float], base: list[float], goal: str, tolerance: float,
                alpha: float = ALPHA) -> tuple[str, str, SeedComparison]:
    """(verdict, reason, comparison) by the rule in the module docstring."""
    c = compare_seeds(idea, base, goal)
    sign = 1.0 if goal == "maximize" else -1.0
    gain = sign * c.mean_diff  # > 0: better in the topic's direction
    seeds = f"{c.n_idea} vs {c.n_base} seeds"
    if c.test == NO_TEST:  # one run each: the tolerance alone, and it says so
        if gain > tolerance + EPS:
            why = f"better by {abs(c.mean_diff):.4g} (> tolerance {tolerance:g}; one run each, untested)"
            return "improvement", why, c
        if gain < -tolerance - EPS:
            return "decline", f"worse by {abs(c.mean_diff):.4g} (> tolerance {tolerance:g}; one run each, untested)", c
        return "maintenance", f"within tolerance {tolerance:g} ({c.mean_diff:+.4g}; one run each, untested)", c
    interval = f"95% CI [{c.ci_low:+.4g}, {c.ci_high:+.4g}]"
    if c.n_idea >= 2 and c.n_base >= 2 and c.p_better < alpha and gain - tolerance > EPS:
        return "improvement", (f"better by {abs(c.mean_diff):.4g} > tolerance {tolerance:g}, p={c.p_better:.3g} "
                               f"({seeds}, {interval})"), c
    if c.p_worse < alpha and -gain - tolerance > EPS:
        return "decline", (f"worse by {abs(c.mean_diff):.4g} > tolerance {tolerance:g}, p={c.p_worse:.3g} "
                           f"({seeds}, {interval})"), c
    if c.n_idea < 2 and gain > tolerance + EPS:
        why = "better on one seed, not repeated"
    elif abs(gain) <= tolerance + EPS:
        why = f"within tolerance {tolerance:g}"
    elif gain > 0:
        why = f"better, not significant: p={c.p_better:.3g} >= {alpha:g}"
    else:
        why = f"worse, not significant: p={c.p_worse:.3g} >= {alpha:g}"
    return "maintenance", f"{c.mean_diff:+.4g}: {why} ({seeds}, {interval})", c


def second_look(idea: list[float], reference: list[float], goal: str, tolerance: float, seeds: int) -> bool:
    """Whether a candidate's `seeds` values (its first look) earn it `seeds` more, on both sides:
    better than the reference by more than the tolerance, not significant at ALPHA, p below
    P_SECOND_LOOK (the rule in the module docstring)."""
    if seeds < 2 or len(idea) != seeds or len(reference) < 2:
        return False
    c = compare_seeds(idea, reference, goal)
    gain = (1.0 if goal == "maximize" else -1.0) * c.mean_diff
    return c.p_better is not None and ALPHA <= c.p_better < P_SECOND_LOOK and gain - tolerance > EPS


def judge(value: float | None, baseline: float, goal: str, tolerance: float, spread: float = 0.0) -> tuple[str, str]:
    """One value against one baseline value: the tolerance (or a larger seed spread) alone, no
    test. Kept for single-run callers; verdicts on repeated seeds use `judge_seeds`."""
    if value is None or not isinstance(value, (int, float)) or math.isnan(value):
        return "failed", "no valid metric"
    delta = value - baseline if goal == "maximize" else baseline - value
    margin, what = ((spread, f"seed spread {spread:.4g}") if spread > tolerance
                    else (tolerance, f"tolerance {tolerance:g}"))
    if delta > margin + EPS:
        return "improvement", f"better than baseline by {abs(value - baseline):.4g} (> {what})"
    if delta < -margin - EPS:
        return "decline", f"worse than baseline by {abs(value - baseline):.4g} (> {what})"
    return "maintenance", f"within {what} of the baseline ({value - baseline:+.4g})"


def beats(value: float | None, reference: float | None, goal: str) -> bool:
    """Whether one value is better than the reference in the topic's direction (the gate for
    repeating a candidate's seeds)."""
    if value is None or reference is None:
        return False
    return value > reference if goal == "maximize" else value < reference


def in_bounds(value: float, bounds: tuple[float, float] | None) -> bool:
    return bounds is None or bounds[0] <= value <= bounds[1]


def run_seconds(attempts) -> float | None:
    """How long the run behind a result's metric took: its last attempt's duration when that attempt
    succeeded (seed 0's run; the other seeds run the same code), else None."""
    last = attempts[-1] if attempts else None
    if last is None or last.exit_code != 0 or last.timed_out:
        return None
    return round(last.duration_s, 3)


def compute_ratio(run_s: float | None, reference_s: float | None) -> float | None:
    """An idea's run time over its reference code's (None when either is unknown or both are too short
    to say anything: see COMPUTE_MIN_S)."""
    if not run_s or not reference_s or max(run_s, reference_s) < COMPUTE_MIN_S:
        return None
    return round(run_s / reference_s, 3)


def seed_summary(values: list[float]) -> tuple[float | None, float]:
    """(mean, spread) of one metric over repeated seeds; the spread is the sample standard
    deviation (0 for a single run)."""
    vals = _finite(values)
    if not vals:
        return None, 0.0
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))


def seed0_metrics(metrics: dict[str, float], metric: str) -> dict[str, float]:
    """What a run's seed 0 reported, from a result's `metrics`: after repeated seeds the metric
    key holds the mean and `<metric>_seed0` the first seed's value (experimenting.repeat_seeds);
    the other keys are seed 0's already."""
    out = {k: v for k, v in metrics.items() if k not in (f"{metric}_seed0", f"{metric}_spread")}
    if f"{metric}_seed0" in metrics:
        out[metric] = metrics[f"{metric}_seed0"]
    return out


MAX_METRICS = 1000     # entries of one final_info.json: each becomes a recorded and logged metric
MAX_KEY_CHARS = 250    # a metric's name (MLflow's limit for a key)
SHOWN_VALUE_CHARS = 80  # of an unusable value, quoted in the failure


def _number(v: object) -> float | None:
    """`v` as a finite float, or None (bools, non-numbers, NaN, infinities, ints too large for a
    float)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _shown(v: object) -> str:
    """A value for a failure message, cut short (an int too large for repr is named by size)."""
    try:
        text = repr(v)
    except ValueError:  # an int of more digits than Python converts to text
        return f"an integer of about {int(v.bit_length() * math.log10(2))} digits"
    return text if len(text) <= SHOWN_VALUE_CHARS else f"{text[:SHOWN_VALUE_CHARS]}...({len(text)} characters)"


def parse_metrics(info: object, metric: str) -> tuple[dict[str, float], str | None]:
    """Numeric metrics from a final_info.json payload and an error if the primary one is unusable.
    Accepts {"accuracy": 0.9} and AI-Scientist style {"accuracy": {"means": 0.9}}. The payload is
    the experiment's: more than MAX_METRICS entries or a key over MAX_KEY_CHARS fails it, and an
    unusable value is quoted cut short."""
    if not isinstance(info, dict):
        return {}, "final_info.json is not a JSON object"
    if len(info) > MAX_METRICS:
        return {}, f"final_info.json holds {len(info)} entries, more than {MAX_METRICS}"
    if long := next((k for k in map(str, info) if len(k) > MAX_KEY_CHARS), None):
        return {}, f"final_info.json has a key of {len(long)} characters, more than {MAX_KEY_CHARS}"
    out: dict[str, float] = {}
    for k, v in info.items():
        if isinstance(v, dict) and "means" in v:
            v = v["means"]
        if (f := _number(v)) is not None:
            out[k] = f
    if metric not in info:
        return out, f"final_info.json has no '{metric}'"
    if metric not in out:
        return out, f"'{metric}' in final_info.json is not a finite number: {_shown(info[metric])}"
    return out, None
