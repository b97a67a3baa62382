"""bench/implementation: the RD2Bench metrics (pure), and the tasks scored in the sandbox: the
ground truth against itself, deliberately wrong implementations and crashing ones."""
from __future__ import annotations

import math

import pytest

from bench.implementation.evaluate import Task, evaluate, evaluate_batch, ground_truth, load_tasks
from bench.implementation.metrics import (
    GAMMA,
    depth_weighted,
    layer_scores,
    pearson,
    score_task,
    shape_consistency,
    summarize,
    value_accuracy,
    value_consistency,
)
from tests.support.sandbox_fixtures import needs_bwrap

np = pytest.importorskip("numpy")


# -- pure metrics -------------------------------------------------------------------------

def test_shape_consistency_is_one_for_equal_shapes_and_falls_with_the_difference():
    assert shape_consistency([2, 3, 4], [2, 3, 4]) == 1.0
    assert shape_consistency([], []) == 1.0
    off_by_one = shape_consistency([2, 3, 5], [2, 3, 4])
    assert off_by_one == pytest.approx(2 / (1 + math.exp(1 / 3)))
    assert 0 < shape_consistency([2, 3, 9], [2, 3, 4]) < off_by_one < 1
    # a missing dimension is padded with 0: [2, 3] vs [2, 3, 4] differs by 4 in one of 3 places
    assert shape_consistency([2, 3], [2, 3, 4]) == pytest.approx(2 / (1 + math.exp(4 / 3)))
    assert shape_consistency(None, [2]) == 0.0


def test_value_consistency_and_padding():
    assert value_consistency([1.0, 2.0], [1.0, 2.0]) == 1.0
    assert value_consistency([1.0, 2.5], [1.0, 2.0]) == pytest.approx(2 / (1 + math.exp(0.25)))
    assert value_consistency([1.0], [1.0, 2.0]) == pytest.approx(2 / (1 + math.exp(1.0)))  # padded with 0
    assert value_consistency([None, 1.0], [1.0, 1.0]) == 0.0  # a non-finite value
    assert value_consistency(None, [1.0]) == 0.0


def test_depth_weighting_favours_deeper_layers():
    assert depth_weighted([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    deep_wrong = depth_weighted([1.0, 1.0, 0.0])
    shallow_wrong = depth_weighted([0.0, 1.0, 1.0])
    assert deep_wrong < shallow_wrong
    w = [GAMMA, GAMMA ** 2, GAMMA ** 3]
    assert deep_wrong == pytest.approx((w[0] + w[1]) / sum(w))
    assert depth_weighted([]) == 0.0


def test_pearson_and_accuracy():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(a, 2 * a + 1) == pytest.approx(1.0)
    assert pearson(a, -a) == pytest.approx(-1.0)
    assert pearson(np.ones(3), np.ones(3)) == 1.0  # both constant and equal
    assert pearson(np.ones(3), a[:3]) is None
    assert pearson(a, a[:3]) is None
    assert value_accuracy(a, a) == 1.0
    assert value_accuracy(a + np.array([0, 0, 1e-3, 0]), a) == 0.75
    assert value_accuracy(a * (1 + 5e-5), a) == 1.0  # inside the relative tolerance
    assert value_accuracy(np.array([np.nan, 2, 3, 4.0]), a) == 0.75


def _out(values, shape=None, typ="tensor"):
    return {"type": typ, "shape": shape if shape is not None else [len(values)], "values": values}


def test_score_task_paths():
    task = {"name": "t", "kind": "function"}
    truth = {"error": None, "sets": [{"output": _out([1.0, 2.0, 3.0]), "layers": {}}]}
    ok = score_task(task, truth, truth)
    assert (ok.executed, ok.format_ok, ok.accuracy) == (True, True, 1.0) and ok.correlation == pytest.approx(1.0)
    scaled = score_task(task, truth, {"error": None, "sets": [{"output": _out([2.0, 4.0, 6.0]), "layers": {}}]})
    assert scaled.format_ok and scaled.correlation == pytest.approx(1.0) and scaled.accuracy == 0.0
    wrong_shape = score_task(task, truth, {"error": None, "sets": [{"output": _out([1.0, 2.0]), "layers": {}}]})
    assert wrong_shape.executed and not wrong_shape.format_ok and wrong_shape.correlation is None
    wrong_type = score_task(task, truth, {"error": None, "sets": [{"output": {"type": "list"}, "layers": {}}]})
    assert wrong_type.executed and not wrong_type.format_ok and wrong_type.accuracy == 0.0
    crashed = score_task(task, truth, {"error": "ValueError: boom", "sets": []})
    assert not crashed.executed and crashed.error == "ValueError: boom"
    silent = score_task(task, truth, None)
    assert not silent.executed and "no result" in silent.error
    s = summarize([ok, scaled, wrong_shape, crashed])
    assert s["execution"] == 0.75 and s["format"] == 0.5
    assert s["correlation"] == pytest.approx(0.5)  # None counts 0
    assert s["accuracy"] == 0.25 and s["exact"] == 0.25
    with pytest.raises(ValueError):
        score_task(task, {"error": "x", "sets": []}, truth)


def test_layer_scores_missing_layer_counts_zero():
    truth = [{"output": _out([1.0, 1.0]), "layers": {"a": _out([0.5]), "b": _out([2.0, 2.0], [1, 2])}}]
    assert layer_scores(truth, truth, ["a", "b"]) == (1.0, 1.0)
    no_b = [{"output": _out([1.0, 1.0]), "layers": {"a": _out([0.5])}}]
    tsc, tvc = layer_scores(no_b, truth, ["a", "b"])
    w = [GAMMA, GAMMA ** 2, GAMMA ** 3]
    assert tsc == pytest.approx((w[0] + w[2]) / sum(w)) and tvc == pytest.approx(tsc)


# -- the tasks, in the sandbox ------------------------------------------------------------------------

TASKS = {t.name: t for t in load_tasks()}

WRONG = {  # plausible mistakes: each runs and has the right format but computes something else
    "focal_loss": """
import torch.nn.functional as F
def focal_loss(logits, targets, gamma=2.0):
    return F.cross_entropy(logits, targets)          # the (1 - p) ** gamma factor forgotten
""",
    "gelu_tanh": """
import torch
def gelu_tanh(x):
    return 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))    # the exact GELU, not the tanh approximation
""",
    "sinusoidal_positions": """
import torch
def sinusoidal_positions(n_positions, d_model):
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000 ** (i / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)   # halves, not interleaved
""",
    "self_attention": """
import torch
from torch import nn
class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        split = lambda y: y.view(b, t, h, d // h).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        w = (q @ k.transpose(-2, -1)).softmax(-1)           # no 1 / sqrt(d) scaling
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, t, d))
""",
    "feed_forward": """
import torch
from torch import nn
class FeedForward(nn.Module):                          # other layer names and no residual
    def __init__(self, dim, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
    def forward(self, x):
        return self.down(torch.relu(self.up(self.ln(x))))
""",
    "cosine_lr": """
import math
def cosine_lr(step, total_steps, base_lr, warmup_steps, min_lr=0.0):
    return [base_lr * 0.5 * (1 + math.cos(math.pi * step / total_steps))]   # a list, no warm-up
""",
}

CRASHING = {
    "huber_loss": "def huber_loss(pred, target, delta=1.0):\n    raise NotImplementedError('todo')\n",
    "rms_norm": "import torch\nclass RMSNorm(torch.nn.Module):\n    def __init__(self, size):\n"
                "        super().__init__()\n    def forward(self, x):\n        return x\n",  # no dim argument
    "dice_loss": "import torch\ndef dice_loss(probs, targets):\n    return probs.sum() / targets\n",  # smooth= refused
    "layer_norm": "def layer_norm(x, weight, bias, eps=1e-5)\n    return x\n",  # SyntaxError: no colon
}


@pytest.fixture(scope="module")
def truth():
    return ground_truth(list(TASKS.values()))


@needs_bwrap
def test_tasks_and_ground_truth(truth):
    assert len(TASKS) >= 10
    assert sum(t.kind == "layer" for t in TASKS.values()) >= 3
    for t in TASKS.values():
        spec = t.spec
        assert spec["signature"] and len(spec["description"]) > 80 and spec["entry"] in t.truth_code()
        sets = truth[t.name]["sets"]
        assert len(sets) == spec.get("sets", 1)
        assert all(s["output"]["type"] in ("tensor", "number") for s in sets)
        for name in spec.get("layers", []):
            assert sets[0]["layers"][name]["type"] == "tensor", (t.name, name)
    # the shared random inputs differ between input sets (the losses vary), so correlation means something
    focal = [s["output"]["values"][0] for s in truth["focal_loss"]["sets"]]
    assert len(set(focal)) == len(focal)


@needs_bwrap
def test_ground_truth_scores_one_wrong_lower_crashing_zero(truth):
    names = list(TASKS)
    items = ([(TASKS[n], TASKS[n].truth_code()) for n in names]
             + [(TASKS[n], code) for n, code in WRONG.items()]
             + [(TASKS[n], code) for n, code in CRASHING.items()])
    scores = evaluate_batch(items, truth)
    own, wrong, crashed = scores[:len(names)], scores[len(names):len(names) + len(WRONG)], scores[-len(CRASHING):]
    for s in own:  # the ground truth against itself, run again in another process
        assert (s.executed, s.format_ok, s.accuracy) == (True, True, 1.0), s
        assert s.correlation == pytest.approx(1.0), s
        if s.kind == "layer":
            assert s.shape_consistency == pytest.approx(1.0) and s.value_consistency == pytest.approx(1.0), s
    assert summarize(own)["execution"] == 1.0 and summarize(own)["accuracy"] == 1.0
    by = {s.task: s for s in wrong}
    for s in wrong:
        assert s.executed, s
        assert s.accuracy < 1.0, s
    assert by["focal_loss"].format_ok and by["focal_loss"].correlation > 0.5  # related, not equal
    assert by["gelu_tanh"].correlation > 0.99 and by["gelu_tanh"].accuracy < 0.9  # close but not within tolerance
    assert by["sinusoidal_positions"].format_ok and by["sinusoidal_positions"].correlation < 0.9
    assert not by["cosine_lr"].format_ok and by["cosine_lr"].accuracy == 0.0 and by["cosine_lr"].correlation is None
    att = by["self_attention"]
    assert att.shape_consistency == pytest.approx(1.0)  # every layer has the right shape
    assert att.value_consistency < 1.0  # the projections agree, the output does not
    ff = by["feed_forward"]
    assert ff.shape_consistency < 0.5 and ff.value_consistency < 0.5  # its named layers do not exist
    for s in crashed:
        assert not s.executed and not s.format_ok and s.accuracy == 0.0 and s.correlation is None, s
        assert s.error
        if s.kind == "layer":
            assert s.shape_consistency == 0.0 and s.value_consistency == 0.0
    assert summarize(crashed) == {"attempts": 4, "execution": 0.0, "format": 0.0, "correlation": 0.0,
                                  "accuracy": 0.0, "exact": 0.0, "shape_consistency": 0.0,
                                  "value_consistency": 0.0}
    assert summarize(own)["accuracy"] > summarize(wrong)["accuracy"] > summarize(crashed)["accuracy"]


@needs_bwrap
def test_a_candidate_that_ends_its_process_is_isolated(truth):
    task: Task = TASKS["gelu_tanh"]
    killer = "import os\ndef gelu_tanh(x):\n    os._exit(3)\n"
    s = evaluate(task, killer, truth["gelu_tanh"])
    assert not s.executed and s.accuracy == 0.0 and "no result" in s.error
    hang = "def gelu_tanh(x):\n    while True:\n        pass\n"
    s = evaluate(task, hang, truth["gelu_tanh"], timeout_s=12)
    assert not s.executed and s.error == "killed: timeout"


def test_bench_renders_a_section_the_records_check_accepts(monkeypatch, tmp_path):
    """What `make bench-implementation` writes passes tests/bench/test_bench_records.py's checks (a
    synthetic record: the real one needs the LLM)."""
    from bench import implementation_bench as ib
    from bench.implementation.metrics import TaskScore
    from tests.support.bench_records import section_problems

    rows = [{**TaskScore("focal_loss", "function", True, True, 0.9, 0.5).as_dict(), "attempt": 0, "cached": False},
            {**TaskScore("focal_loss", "function", False, False, None, 0.0, error="boom").as_dict(), "attempt": 1,
             "cached": False},
            {**TaskScore("rms_norm", "layer", True, True, 1.0, 1.0, 1.0, 1.0).as_dict(), "attempt": 0,
             "cached": False}]
    rec = {"script": ib.SCRIPT, "record": "bench/records/implementation_test_only.json", "date": "2026-11-23",
           "machine": "2 cores (test), 8 GiB, Python 3.11", "model": "m", "endpoint": "local", "attempts": 2,
           "wall_s": 10.0, "rows": rows, "tasks": ["focal_loss", "rms_norm"]}
    body = ib.render(rec)
    head, _, rest = body.partition("\n")
    assert section_problems(head, rest) == ["record bench/records/implementation_test_only.json does not exist"]
    assert "| focal_loss | function | 0.50 | 0.50 | 0.45 | 0.90 | 0.25 | 0.50 |  |  |" in body
    assert "| rms_norm | layer | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 |" in body
    assert ib.record_name(True, "qwen") == "implementation"
    assert ib.record_name(False, "gpt-4o-mini") == "implementation_gpt_4o_mini"
