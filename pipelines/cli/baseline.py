"""`researchloop baseline --topic NAME [--seeds N]`: run only the reference code over its seeds, as
the set-up's baseline_results does (`run_reference`, in the same device share), and print the
baseline with its spread over seeds: mean, standard deviation, 95 % interval of the mean, each
seed's value and the time. No LLM is asked and no round starts.

The runs are memoised by code and command like the set-up's (under DAGSTER_HOME's workspaces),
so a `researchloop run` afterwards reuses them. The record the rounds judge against is the
set-up's: `researchloop status` shows it once `researchloop run` has stored it."""
from __future__ import annotations

import math
import sys
import time

from assets.run_results.seeds import run_reference
from pipelines.cli.common import ensure_home, make_console, new_log_path, plain, stderr_to
from resources.devices import device_slot
from resources.paths import register_topic_dir, resolve_topic_dir, under_home
from resources.runner import Runner
from schemas.records import RunResult
from schemas.topic import TopicSpec, TopicSpecError, load_topic

CONFIDENCE = 0.95


def add_parser(subparsers) -> None:
    b = subparsers.add_parser("baseline", help="run the reference code over its seeds and print the baseline")
    b.add_argument("--topic", required=True, help="folder name under experiments/ or a path to a topic folder")
    b.add_argument("--seeds", type=int, default=0,
                   help="seeds 0..N-1 (default: the topic's budget.seeds); more than 1 needs {seed} in `run`")
    b.set_defaults(fn=cmd_baseline)


def mean_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The two-sided t interval of the mean of `values`; None for fewer than two."""
    if len(values) < 2:
        return None
    from scipy import stats  # lazy: scipy costs an import

    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def baseline_lines(spec: TopicSpec, result: RunResult, seconds: float) -> list[str]:
    """What `researchloop baseline` prints of the reference code's result."""
    m = spec.metric.name
    if result.status != "success" or result.metric_value is None:
        return [f"baseline of {spec.name} FAILED: {result.reason or 'no ' + m}", f"time {seconds:.1f} s"]
    values = result.seed_values or [result.metric_value]
    n = len(values)
    mean = sum(values) / n
    line = f"baseline of {spec.name}: {m} = {mean:.6g} ({spec.metric.goal}), mean of {n} seed{'s' * (n > 1)}"
    if (ci := mean_interval(values)) is not None:
        line += f", std {result.metric_spread:.4g}, {CONFIDENCE:.0%} interval of the mean [{ci[0]:.6g}, {ci[1]:.6g}]"
    else:
        line += ": one run, no spread (the run command takes no {seed}, or --seeds 1)"
    lines = [line]
    lines += [f"  seed {i}: {v:.6g}" for i, v in enumerate(values)]
    ran = sum(a.duration_s for a in result.attempts)
    lines.append(f"time {seconds:.1f} s (seed 0's run {ran:.1f} s; runs done before are read from their memo)")
    return lines


def cmd_baseline(args) -> int:
    ensure_home()
    console = make_console()
    log_path = new_log_path()
    try:
        spec = load_topic(resolve_topic_dir(args.topic))
    except TopicSpecError as e:
        console.print(f"[red]cannot use topic {args.topic}:[/red] {plain(str(e))}")
        return 2
    if args.seeds:
        if args.seeds < 1 or (args.seeds > 1 and "{seed}" not in spec.run):
            console.print(f"[red]--seeds {args.seeds}:[/red] needs at least 1, and {{seed}} in the topic's run "
                          "command for more than 1", highlight=False)
            return 2
        spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"seeds": args.seeds})})
    register_topic_dir(spec.name, spec.path)
    console.print(f"baseline of {spec.name}: {spec.budget.seeds} seed(s) of `{plain(spec.run)}`; log {log_path}",
                  highlight=False, soft_wrap=True)
    t0 = time.monotonic()
    with stderr_to(log_path):
        # the same device share as the set-up's baseline_results and each idea's run get
        with device_slot(under_home("slots")) as env:
            result = run_reference(spec, Runner(), None, log=lambda line: print(line, file=sys.stderr), env=env)
    for line in baseline_lines(spec, result, time.monotonic() - t0):
        console.print(plain(line), highlight=False, soft_wrap=True)
    return 0 if result.status == "success" else 1
