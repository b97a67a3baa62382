"""Runs implementations of the benchmark's tasks and records their outputs. It runs INSIDE the
sandbox (resources/runner.py), copied into the workspace beside the code it runs, so it imports
nothing of the project: only the standard library and torch.

    python harness.py jobs.json results.json

jobs.json: a list of {"id", "code": file name in the workspace, "task": the task's spec (entry,
kind, inputs, kwargs, init, layers, sets)}. For each job and each input set, the inputs are drawn
from a torch generator seeded with the set's number, so every implementation of a task sees the
same inputs; a layer's parameters are filled from a generator seeded by each parameter's name, so
implementations that name and shape their parameters as the task says hold the same weights.
results.json is rewritten after every job ({"id": {"error": ..., "sets": [...]}}), so what was
done survives a job that hangs or kills the process."""
import importlib.util
import json
import math
import os
import sys
import traceback
import zlib

MAX_VALUES = 20000  # floats recorded per tensor


def draw(spec, gen):
    import torch

    kind, arg = next(iter((k, v) for k, v in spec.items() if k in ("randn", "rand", "randint", "int", "float")))
    if kind == "int":  # a Python int in [low, high]
        return int(torch.randint(arg[0], arg[1] + 1, (1,), generator=gen).item())
    if kind == "float":
        return float(arg[0] + (arg[1] - arg[0]) * torch.rand(1, generator=gen).item())
    if kind == "randint":
        t = torch.randint(spec.get("low", 0), spec["high"], tuple(arg), generator=gen)
        return t.float() if spec.get("dtype") == "float" else t
    t = (torch.randn if kind == "randn" else torch.rand)(tuple(arg), generator=gen)
    return t * spec.get("scale", 1.0) + spec.get("shift", 0.0)


def inputs_for(task, set_index):
    import torch

    gen = torch.Generator().manual_seed(1000 + set_index)
    drawn = {name: draw(spec, gen) for name, spec in task.get("inputs", {}).items()}
    return {**drawn, **task.get("kwargs", {})}


def fill_parameters(module):
    import torch

    with torch.no_grad():
        for name, p in module.named_parameters():
            gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            p.copy_(torch.randn(tuple(p.shape), generator=gen) * 0.5)


def encode(value):
    """A result as {"type", "shape", "values"}: tensors and numbers are recorded, anything else
    only by its type name."""
    import torch

    if isinstance(value, bool) or value is None:
        return {"type": type(value).__name__}
    if isinstance(value, (int, float)):
        v = float(value)
        return {"type": "number", "shape": [], "values": [v if math.isfinite(v) else None]}
    if isinstance(value, torch.Tensor):
        flat = value.detach().to(torch.float64).reshape(-1)[:MAX_VALUES].tolist()
        return {"type": "tensor", "shape": list(value.shape),
                "values": [x if math.isfinite(x) else None for x in flat]}
    return {"type": type(value).__name__}


def run_job(job):
    import torch

    task = job["task"]
    spec = importlib.util.spec_from_file_location(f"candidate_{job['id']}", os.path.abspath(job["code"]))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entry = getattr(mod, task["entry"])
    sets = []
    for s in range(task.get("sets", 1)):
        args = inputs_for(task, s)
        layers = {}
        if task["kind"] == "layer":
            torch.manual_seed(0)
            model = entry(**task.get("init", {}))
            fill_parameters(model)
            model.eval()
            for name in task.get("layers", []):
                try:
                    sub = model.get_submodule(name)
                except AttributeError:
                    layers[name] = None  # no such layer: scored as missing
                    continue

                def hook(_m, _in, out, name=name, layers=layers):
                    layers[name] = encode(out[0] if isinstance(out, tuple) else out)
                sub.register_forward_hook(hook)
            with torch.no_grad():
                out = model(**args)
        else:
            out = entry(**args)
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        sets.append({"output": encode(out), "layers": layers})
    return sets


def main(jobs_file, results_file):
    import torch

    torch.set_num_threads(1)
    with open(jobs_file) as f:
        jobs = json.load(f)
    results = {}
    failed = False
    for job in jobs:
        try:
            results[job["id"]] = {"error": None, "sets": run_job(job)}
        except BaseException as e:  # SystemExit included: one job's failure is its own
            failed = True
            tb = traceback.format_exc(limit=-4)
            results[job["id"]] = {"error": f"{type(e).__name__}: {e}"[:500], "traceback": tb[-2000:], "sets": []}
        tmp = results_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f)
        os.replace(tmp, results_file)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
