"""RD2Bench's implementation metrics (Chen et al.; seed papers 003/004), as pure functions over
what bench/implementation/harness.py records: an output is {"type", "shape", "values"} (values
flattened, None for a non-finite number), one per input set.

Per attempt at a task:
- executed: the code ran on every input set without an error (RD2Bench's running success).
- format_ok: executed and every output is a tensor or a number with the ground truth's shape
  (RD2Bench's format success: the result has the expected form).
- correlation: Pearson's r between the implementation's and the ground truth's values, all input
  sets concatenated; None when the format is wrong or a side is constant (1.0 when both sides are
  constant and equal).
- accuracy: the fraction of values within tolerance of the ground truth's; 0 when the format is
  wrong. RD2Bench counts |y* - y| < 1e-6; float32 code that sums in another order differs by more
  than that, so here a value counts when |y* - y| <= ATOL + RTOL * |y| (ATOL 1e-5, RTOL 1e-4).
- for layers (modules with parameters): per layer i (the task's named submodules, shallow to
  deep, then the module's output as the deepest), the tensor shape consistency
  S_shape = 2 / (1 + exp(mean_j |dim_j - dim*_j|)) over the d = max of the two ranks (the shorter
  shape padded with zeros) and the value consistency S_value = 2 / (1 + exp(mean_j |z_j - z*_j|))
  over the flattened values (the shorter padded with zeros); a layer the implementation lacks
  scores 0 on both. RD2Bench's formula is (1 + exp(.))^-1, whose best value is 0.5; the factor 2
  makes an exact match score 1. The task's score is the depth-weighted mean
  sum_i S_i gamma^i / sum_i gamma^i with gamma = 1.1 (RD2Bench's value), i = 1 for the shallowest.
Averages over attempts and tasks count a missing correlation as 0 (RD2Bench: "0 for NaN")."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

ATOL = 1e-5
RTOL = 1e-4
GAMMA = 1.1


@dataclass
class TaskScore:
    task: str
    kind: str
    executed: bool
    format_ok: bool
    correlation: float | None
    accuracy: float
    shape_consistency: float | None = None   # layers only
    value_consistency: float | None = None   # layers only
    error: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _values(out: Mapping) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in out.get("values", [])], dtype=np.float64)


def format_matches(out: Mapping | None, truth: Mapping) -> bool:
    return (out is not None and out.get("type") in ("tensor", "number")
            and list(out.get("shape", [])) == list(truth.get("shape", []))
            and len(out.get("values", [])) == len(truth.get("values", [])))


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson's r; 1.0 when both sides are constant and equal, None when only one varies or a
    value is not finite."""
    if a.shape != b.shape or a.size == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return 1.0 if sa == sb and np.allclose(a, b, rtol=RTOL, atol=ATOL) else None
    return float(np.clip(((a - a.mean()) * (b - b.mean())).mean() / (sa * sb), -1.0, 1.0))


def value_accuracy(got: np.ndarray, truth: np.ndarray, atol: float = ATOL, rtol: float = RTOL) -> float:
    if got.shape != truth.shape or truth.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        ok = np.abs(got - truth) <= atol + rtol * np.abs(truth)
    return float(np.mean(ok & np.isfinite(got)))


def _padded(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(a), len(b))
    pa, pb = np.zeros(n), np.zeros(n)
    pa[:len(a)], pb[:len(b)] = a, b
    return pa, pb


def _logistic_score(mean_abs: float) -> float:
    """2 / (1 + exp(x)): 1 at x = 0, falling towards 0 (x = inf: 0)."""
    if not math.isfinite(mean_abs) or mean_abs > 700:
        return 0.0
    return 2.0 / (1.0 + math.exp(mean_abs))


def shape_consistency(got: Sequence[int] | None, truth: Sequence[int]) -> float:
    if got is None:
        return 0.0
    a, b = _padded(list(got), list(truth))
    return _logistic_score(float(np.abs(a - b).mean())) if a.size else 1.0


def value_consistency(got: Sequence[float | None] | None, truth: Sequence[float | None]) -> float:
    if got is None:
        return 0.0
    g = [np.nan if v is None else v for v in got]
    t = [np.nan if v is None else v for v in truth]
    a, b = _padded(g, t)
    return _logistic_score(float(np.abs(a - b).mean())) if a.size else 1.0


def depth_weighted(scores: Sequence[float], gamma: float = GAMMA) -> float:
    """sum_i s_i gamma^i / sum_i gamma^i, i = 1 for the first (shallowest) layer."""
    if not scores:
        return 0.0
    w = [gamma ** i for i in range(1, len(scores) + 1)]
    return float(sum(s * wi for s, wi in zip(scores, w)) / sum(w))


def layer_scores(got_sets: Sequence[Mapping], truth_sets: Sequence[Mapping],
                 layers: Sequence[str], gamma: float = GAMMA) -> tuple[float, float]:
    """(tensor shape consistency, tensor value consistency) of a layer task, each the mean over
    the input sets of the depth-weighted per-layer scores (the task's layers, then the output)."""
    shape_s, value_s = [], []
    for s, truth in enumerate(truth_sets):
        got = got_sets[s] if s < len(got_sets) else {}
        per_shape, per_value = [], []
        for name in [*layers, None]:
            t = truth["output"] if name is None else (truth.get("layers") or {}).get(name)
            g = got.get("output") if name is None else (got.get("layers") or {}).get(name)
            if t is None:  # the ground truth itself did not record this layer: not scored
                continue
            usable = g is not None and g.get("type") in ("tensor", "number")
            per_shape.append(shape_consistency(g["shape"] if usable else None, t["shape"]))
            per_value.append(value_consistency(g["values"] if usable else None, t["values"]))
        shape_s.append(depth_weighted(per_shape, gamma))
        value_s.append(depth_weighted(per_value, gamma))
    return float(np.mean(shape_s)), float(np.mean(value_s))


def score_task(task: Mapping, truth: Mapping, got: Mapping | None) -> TaskScore:
    """One attempt: `truth` and `got` are the harness's results for the task ({"error", "sets"});
    `got` None: the code never reported (killed, timed out, no result file)."""
    name, kind = task["name"], task["kind"]
    if truth.get("error") or not truth.get("sets"):
        raise ValueError(f"{name}: the ground truth itself failed: {truth.get('error')}")
    t_sets = truth["sets"]
    executed = bool(got) and not got.get("error") and len(got.get("sets", [])) == len(t_sets)
    error = None if executed else ((got or {}).get("error") or "no result (killed, timed out or crashed)")
    is_layer = kind == "layer"
    if not executed:
        return TaskScore(name, kind, False, False, None, 0.0, 0.0 if is_layer else None,
                         0.0 if is_layer else None, error)
    g_sets = got["sets"]
    format_ok = all(format_matches(g["output"], t["output"]) for g, t in zip(g_sets, t_sets))
    corr, acc = None, 0.0
    if format_ok:
        a = np.concatenate([_values(g["output"]) for g in g_sets])
        b = np.concatenate([_values(t["output"]) for t in t_sets])
        corr, acc = pearson(a, b), value_accuracy(a, b)
    tsc = tvc = None
    if is_layer:
        tsc, tvc = layer_scores(g_sets, t_sets, task.get("layers", []))
    return TaskScore(name, kind, True, format_ok, corr, acc, tsc, tvc, None)


def summarize(scores: Sequence[TaskScore]) -> dict:
    """Mean rates over attempts (RD2Bench's avg.), a missing correlation counted as 0; the layer
    metrics over the layer attempts only."""
    if not scores:
        return {"attempts": 0}
    layer = [s for s in scores if s.kind == "layer"]
    out = {
        "attempts": len(scores),
        "execution": float(np.mean([s.executed for s in scores])),
        "format": float(np.mean([s.format_ok for s in scores])),
        "correlation": float(np.mean([s.correlation or 0.0 for s in scores])),
        "accuracy": float(np.mean([s.accuracy for s in scores])),
        "exact": float(np.mean([s.accuracy == 1.0 for s in scores])),
    }
    if layer:
        out["shape_consistency"] = float(np.mean([s.shape_consistency or 0.0 for s in layer]))
        out["value_consistency"] = float(np.mean([s.value_consistency or 0.0 for s in layer]))
    return out
