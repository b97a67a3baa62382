"""Improvement / maintenance / decline against the baseline (DOLPHIN 3.3)."""

from __future__ import annotations

import math


def judge(value: float | None, baseline: float, goal: str, tolerance: float, spread: float = 0.0) -> tuple[str, str]:
    """(verdict, reason). A change within the margin of the baseline is maintenance; the margin is
    the tolerance, or the seed spread when repeated seeds vary more than that."""
    if value is None or not isinstance(value, (int, float)) or math.isnan(value):
        return "failed", "no valid metric"
    delta = value - baseline if goal == "maximize" else baseline - value
    margin, what = (spread, f"seed spread {spread:.4g}") if spread > tolerance else (tolerance, f"tolerance {tolerance:g}")
    eps = 1e-9  # a change of exactly the margin (up to float rounding) is maintenance
    if delta > margin + eps:
        return "improvement", f"better than baseline by {abs(value - baseline):.4g} (> {what})"
    if delta < -margin - eps:
        return "decline", f"worse than baseline by {abs(value - baseline):.4g} (> {what})"
    return "maintenance", f"within {what} of the baseline ({value - baseline:+.4g})"


def seed_summary(values: list[float]) -> tuple[float | None, float]:
    """(mean, spread) of one metric over repeated seeds; the spread is the sample standard
    deviation (0 for a single run)."""
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return None, 0.0
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))


def parse_metrics(info: object, metric: str) -> tuple[dict[str, float], str | None]:
    """Numeric metrics from a final_info.json payload and an error if the primary one is unusable.
    Accepts {"accuracy": 0.9} and AI-Scientist style {"accuracy": {"means": 0.9}}."""
    if not isinstance(info, dict):
        return {}, "final_info.json is not a JSON object"
    out: dict[str, float] = {}
    for k, v in info.items():
        if isinstance(v, dict) and "means" in v:
            v = v["means"]
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = float(v)
    if metric not in info:
        return out, f"final_info.json has no '{metric}'"
    if metric not in out:
        return out, f"'{metric}' in final_info.json is not a finite number: {info[metric]!r}"
    return out, None
