"""Improvement / maintenance / decline against the baseline (DOLPHIN 3.3)."""
from __future__ import annotations

import math


def judge(value: float | None, baseline: float, goal: str, tolerance: float) -> tuple[str, str]:
    """(verdict, reason). A change within +-tolerance of the baseline is maintenance."""
    if value is None or not isinstance(value, (int, float)) or math.isnan(value):
        return "failed", "no valid metric"
    delta = value - baseline if goal == "maximize" else baseline - value
    eps = 1e-9  # a change of exactly the tolerance (up to float rounding) is maintenance
    if delta > tolerance + eps:
        return "improvement", f"better than baseline by {abs(value - baseline):.4g} (> tolerance {tolerance:g})"
    if delta < -tolerance - eps:
        return "decline", f"worse than baseline by {abs(value - baseline):.4g} (> tolerance {tolerance:g})"
    return "maintenance", f"within tolerance {tolerance:g} of the baseline ({value - baseline:+.4g})"


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
