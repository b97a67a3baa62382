"""`researchloop status`: topics, rounds done, best result, the baseline (from the set-up, before any
round finished too), tokens; runs in flight or queued."""
from __future__ import annotations

import dagster as dg
from rich.table import Table

from assets import ROUND_ASSETS
from assets.feedback_summary.feedback import progress_rows
from assets.shared.metadata import round_usage
from assets.shared.partitions import multi_key
from pipelines.cli.common import ensure_home, make_console
from pipelines.guards import daemon_state
from resources.store import record_store
from schemas.frames import from_frame
from schemas.records import RunResult


def add_parser(subparsers) -> None:
    s = subparsers.add_parser("status", help="topics, rounds done, best results")
    s.set_defaults(fn=cmd_status)


def baseline_cell(store, topic: str, rows: list[dict]) -> str:
    """The topic's baseline as its set-up stored it (baseline_results: mean ± std over seeds), shown
    before any round finished; else the last round's; '' when there is none yet."""
    df = store.read("baseline_results", topic)
    base = from_frame(df, RunResult)[0] if df is not None and not df.is_empty() else None
    if base is not None and base.metric_value is not None:
        n = len(base.seed_values) or 1
        return f"{base.metric_value:.4f}" + (f" ± {base.metric_spread:.4f} ({n} seeds)" if n > 1 else "")
    if base is not None:
        return "failed"
    return f"{rows[-1]['baseline']:.4f}" if rows and rows[-1]["baseline"] is not None else ""


def cmd_status(args) -> int:
    ensure_home()
    store = record_store()
    console = make_console()
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
                      baseline_cell(store, topic, rows),
                      str(int(sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage))),
                      f"{sum(u['cost_usd'] for u in usage):.4f}")
    console.print(table)
    active = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.QUEUED,
                                                       dg.DagsterRunStatus.STARTING]))
    console.print(f"running or queued runs: {len(active)}")
    for run in active:
        partition = run.tags.get("dagster/partition", "")
        console.print(f"  {run.status.value:<8} {run.job_name} {partition} ({run.run_id[:8]})")
    if any(run.status == dg.DagsterRunStatus.QUEUED for run in active):
        daemon = daemon_state(instance)
        console.print(f"queued runs start when a dagster-daemon does: {daemon.detail}" +
                      ("" if daemon.alive else "; `researchloop run` cancels its topic's queued runs"), highlight=False)
    return 0

