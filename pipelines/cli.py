"""`researchloop`: the loop from the command line, over the same assets the UI runs.

  researchloop run --topic NAME [--rounds N]   set up a topic and run rounds headless
  researchloop status                          topics, rounds done, best result, tokens
  researchloop lineage IDEA_ID                 how an idea arose, what it changed and scored
  researchloop rank --topic T --papers F.jsonl rank a paper list for a topic (JSON lines out)
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from resources.paths import REPO_ROOT


def _ensure_home() -> None:
    os.environ.setdefault("DAGSTER_HOME", str(REPO_ROOT / "dagster_home"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)


def _console():
    """A rich console; wide when the output is a file or a pipe, so tables do not wrap."""
    from rich.console import Console

    return Console(width=None if Console().is_terminal else 160)


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
FANNED_OUT = {"run_results"}  # stages with one Dagster step per idea


def _stage_outcome(result) -> tuple[bool, list[str], str, dict]:
    failed = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
    meta = {}
    for m in result.get_asset_materialization_events():
        meta = {k: v.value for k, v in m.materialization.metadata.items()
                if k in ("llm_calls", "llm_cached_calls", "prompt_tokens", "completion_tokens", "cost_usd")}
    return result.success, failed, result.run_id, meta


def materialize_stage(asset_def, partition_key, instance, resources, parallel: int = 1):
    """Materialise one asset for one partition; returns (ok, failed check names, run_id, usage).
    A fanned-out stage (one step per idea) runs with the multiprocess executor when parallel > 1."""
    import dagster as dg

    from assets import ALL_ASSETS
    from assets.shared.partitions import round_x_topic

    tags = {"researchloop/topic": str(partition_key).split("|")[-1]}
    if parallel > 1 and asset_def.key.to_user_string() in FANNED_OUT:
        from pipelines.definitions import research_round

        tags.update(round_x_topic.get_tags_for_partition_key(str(partition_key)))
        config = {**QUIET, "execution": {"config": {"multiprocess": {"max_concurrent": parallel}}}}
        with dg.execute_job(dg.reconstructable(research_round), instance, run_config=config, tags=tags,
                            asset_selection=[asset_def.key], raise_on_error=False) as result:
            return _stage_outcome(result)
    result = dg.materialize(ALL_ASSETS, selection=[asset_def], partition_key=partition_key, instance=instance,
                            resources=resources, run_config=QUIET, raise_on_error=False, tags=tags)
    return _stage_outcome(result)


def cmd_run(args) -> int:
    _ensure_home()
    import dagster as dg
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from assets import ROUND_ASSETS, TOPIC_ASSETS
    from assets.shared.partitions import multi_key, round_partitions, topic_partitions
    from pipelines.definitions import build_resources
    from resources.devices import parallel_limit
    from resources.paths import resolve_topic_dir
    from schemas.topic import TopicSpecError, load_topic

    console = _console()
    try:
        spec = load_topic(resolve_topic_dir(args.topic))
    except TopicSpecError as e:
        console.print(f"[red]cannot use topic {args.topic}:[/red] {e}")
        return 2
    n_rounds = args.rounds or spec.budget.rounds
    rounds = [f"r{i}" for i in range(args.start, args.start + n_rounds)]
    instance = dg.DagsterInstance.get()
    for name, keys in ((topic_partitions.name, [spec.name]), (round_partitions.name, rounds)):
        have = set(instance.get_dynamic_partitions(name))
        missing = [k for k in keys if k not in have]
        if missing:
            instance.add_dynamic_partitions(name, missing)
    resources = build_resources(resolved=True)
    llm = resources["llm"]
    from resources.local_llm import server_status

    started_server = llm.is_local() and not (server_status() or {}).get("alive")
    parallel = args.parallel or parallel_limit()
    os.environ["RESEARCHLOOP_MAX_PARALLEL"] = str(parallel)  # the step processes share out devices by it
    plan = [(a, spec.name) for a in TOPIC_ASSETS] + [(a, multi_key(spec.name, rk)) for rk in rounds for a in ROUND_ASSETS]
    console.print(f"[bold]researchloop[/bold]: topic [cyan]{spec.name}[/cyan], rounds {', '.join(rounds)}, "
                  f"model {llm.model_name()} ({'local' if llm.is_local() else 'remote'}), "
                  f"experiments in parallel: {parallel}, "
                  f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}")
    t_start = time.monotonic()
    stopped_at = None
    timings: list[dict] = []
    # a live bar on a terminal; plain lines when the output is a file or a pipe
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), console=console,
                        disable=not console.is_terminal)
    try:
        with progress:
            task = progress.add_task("starting", total=len(plan))
            for i, (asset_def, pk) in enumerate(plan, 1):
                name = asset_def.key.to_user_string()
                progress.update(task, description=f"{pk} {name}")
                t0 = time.monotonic()
                ok, failed_checks, run_id, meta = materialize_stage(asset_def, pk, instance, resources, parallel)
                timings.append({"partition": str(pk), "asset": name, "ok": ok,
                                "seconds": round(time.monotonic() - t0, 2), **meta})
                console.print(f"  [{i}/{len(plan)}] {'[green]ok[/green]' if ok else '[red]FAILED[/red]'} "
                              f"{str(pk):<36} {name:<18} {time.monotonic() - t0:6.1f}s"
                              + (f"  failed checks: {failed_checks}" if failed_checks else ""), highlight=False)
                progress.advance(task)
                if not ok:
                    stopped_at = (name, pk, run_id)
                    break
    finally:
        if started_server and not args.keep_server:
            llm.local_llm.stop()
    console.print(f"total {time.monotonic() - t_start:.0f}s")
    if args.timings:
        import json

        with open(args.timings, "w") as f:
            json.dump({"topic": spec.name, "rounds": rounds, "model": llm.model_name(),
                       "total_s": round(time.monotonic() - t_start, 1), "stages": timings}, f, indent=1)
    print_verdicts(console, spec.name, rounds)
    if stopped_at:
        console.print(f"[red]stopped: {stopped_at[0]} failed for {stopped_at[1]}[/red] "
                      f"(run {stopped_at[2]}; see `make ui` or the run's logs)")
        return 1
    return 0


def print_verdicts(console, topic: str, rounds: list[str]) -> None:
    from rich.table import Table

    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import Feedback

    store = Store()
    table = Table(title=f"{topic}: verdicts against the baseline")
    for c in ("round", "idea", "verdict", "metric", "baseline", "delta", "reason"):
        table.add_column(c)
    colours = {"improvement": "green", "maintenance": "yellow", "decline": "red", "failed": "magenta"}
    for rk in rounds:
        df = store.read("feedback_summary", topic, rk)
        if df is None:
            continue
        for f in from_frame(df, Feedback):
            fmt = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
            table.add_row(rk, f.name, f"[{colours[f.verdict]}]{f.verdict}[/]", fmt(f.metric_value),
                          fmt(f.baseline_value), "" if f.delta is None else f"{f.delta:+.4f}", f.reason[:70])
    console.print(table)


def cmd_status(args) -> int:
    _ensure_home()
    import dagster as dg
    from rich.table import Table

    from assets import ROUND_ASSETS
    from assets.feedback_summary.feedback import progress_rows
    from assets.shared.metadata import round_usage
    from assets.shared.partitions import multi_key
    from resources.store import Store

    store = Store()
    console = _console()
    instance = dg.DagsterInstance.get()
    stages = [a.key.to_user_string() for a in ROUND_ASSETS]
    table = Table(title="researchloop status")
    for c in ("topic", "rounds done", "ideas judged", "improvements", "best", "baseline", "LLM tokens", "cost USD"):
        table.add_column(c)
    for topic in store.topics():
        rows = progress_rows(store, topic)
        best = [r["best"] for r in rows if r["best"] is not None]
        usage = [round_usage(instance, str(multi_key(topic, r["round"])), stages) for r in rows]
        table.add_row(topic, str(len(rows)), str(sum(r["ideas"] for r in rows)),
                      str(sum(r["improvement"] for r in rows)), f"{max(best):.4f}" if best else "",
                      f"{rows[-1]['baseline']:.4f}" if rows and rows[-1]["baseline"] is not None else "",
                      str(int(sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage))),
                      f"{sum(u['cost_usd'] for u in usage):.4f}")
    console.print(table)
    active = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.QUEUED,
                                                       dg.DagsterRunStatus.STARTING]))
    console.print(f"running or queued runs: {len(active)}")
    for run in active:
        console.print(f"  {run.status.value:<8} {run.job_name} {run.tags.get('dagster/partition', '')} ({run.run_id[:8]})")
    return 0


def cmd_lineage(args) -> int:
    _ensure_home()
    from pipelines.lineage import idea_lineage

    text = idea_lineage(args.idea_id)
    print(text)
    return 0 if not text.startswith("unknown idea") else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="researchloop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="set up a topic and run rounds of the loop headless")
    r.add_argument("--topic", required=True, help="folder name under experiments/ or a path to a topic folder")
    r.add_argument("--rounds", type=int, default=0, help="rounds to run (default: the topic's budget)")
    r.add_argument("--start", type=int, default=1, help="first round number (default 1)")
    r.add_argument("--keep-server", action="store_true", help="leave the local LLM server running afterwards")
    r.add_argument("--timings", default="", help="write per-stage wall time and tokens to this JSON file")
    r.add_argument("--parallel", type=int, default=0,
                   help="experiments run at once, one Dagster step per idea (default: $RESEARCHLOOP_MAX_PARALLEL, "
                        "else one per GPU, else one per core); 1 runs the steps in this process")
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("status", help="topics, rounds done, best results")
    s.set_defaults(fn=cmd_status)
    l = sub.add_parser("lineage", help="how an idea arose, what it changed, what it scored")
    l.add_argument("idea_id", help="e.g. pointcloud_classification/r1/some_idea")
    l.set_defaults(fn=cmd_lineage)
    from pipelines import rank_cli

    rank_cli.add_parser(sub)   # researchloop rank
    from pipelines import debug_cli

    debug_cli.add_parser(sub)  # researchloop debug
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
