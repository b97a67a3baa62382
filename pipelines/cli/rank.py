"""`researchloop rank`: rank any paper list for any topic folder, outside the loop.

    researchloop rank --topic DIR --papers FILE.jsonl [--naive | --mode MODE] [--batch N]

The papers file holds JSON lines (or Parquet) with `paper_id`, `title`, `abstract` (or
`summary`), optionally `year` and `venue`. The topic's task attributes come from the same
function the `topic_brief` asset uses (cached LLM answers make a repeat free). One JSON line per
paper goes to stdout, in the file's order: paper_id, score (1-10), kept (score >= 8), the
relevance (yes / no, or the category), the attribute agreement, the paper's own task / input /
output and the similarities (attribute mode), and a one-line reason (the default mode: P(yes) and
the abstract similarity). Progress and a summary go to stderr.
"""
from __future__ import annotations

import json

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from assets.paper_rankings.rank import DEFAULT_MODE, MODES, rank_papers
from assets.topic_brief.brief import build_brief
from pipelines.cli.common import ensure_home
from pipelines.definitions import build_resources
from resources.local_llm import server_status
from resources.paths import resolve_topic_dir
from resources.sources import load_papers
from schemas.topic import TopicSpecError, load_topic


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("rank", help="rank a paper list (JSON lines) for a topic; JSON lines out")
    p.add_argument("--topic", required=True, help="folder name under experiments/ or a path to a topic folder")
    p.add_argument("--papers", required=True, help="JSON lines or Parquet: paper_id, title, abstract, [year, venue]")
    p.add_argument("--naive", action="store_true", help="relevance only, without task attributes (DOLPHIN's baseline)")
    p.add_argument("--mode", choices=MODES, default=None,
                   help=f"ranking mode (default {DEFAULT_MODE}; --naive = naive)")
    p.add_argument("--batch", type=int, default=0,
                   help="papers per LLM request (default: 5 on the local model, 1 on a remote endpoint)")
    p.add_argument("--keep-server", action="store_true", help="leave the local LLM server running afterwards")
    p.set_defaults(fn=cmd_rank)


def cmd_rank(args) -> int:
    ensure_home()
    err = Console(stderr=True, soft_wrap=True)
    if args.naive and args.mode not in (None, "naive"):
        err.print(f"[red]--naive contradicts --mode {args.mode}[/red]")
        return 2
    mode = "naive" if args.naive else (args.mode or DEFAULT_MODE)
    if args.batch < 0:
        err.print("[red]--batch must be >= 1[/red]")
        return 2
    try:
        spec = load_topic(resolve_topic_dir(args.topic))
    except TopicSpecError as e:
        err.print(f"[red]cannot use topic {args.topic}:[/red] {e}")
        return 2
    try:
        papers = load_papers(args.papers, source="file")
    except (OSError, ValueError) as e:
        err.print(f"[red]cannot read papers from {args.papers}:[/red] {e}")
        return 2
    if not papers:
        err.print(f"[red]no paper with a title and an abstract in {args.papers}[/red]")
        return 2

    resources = build_resources(resolved=True)
    llm, embedder = resources["llm"], resources["embedder"]
    started_server = llm.is_local() and not (server_status() or {}).get("alive")
    try:
        brief, res = build_brief(spec, llm)
        if not res.ok:
            err.print(f"[yellow]task attributes not extracted ({res.error}); using the topic's title[/yellow]")
        err.print(f"topic [cyan]{spec.name}[/cyan]: task {brief.task!r}, input {brief.input!r}, output "
                  f"{brief.output!r}; {len(papers)} papers, mode {mode}, model {llm.model_name()}", highlight=False)
        passes = 2 if mode == "attributes" else 1
        progress = Progress(TextColumn("ranking"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TimeElapsedColumn(), console=err)
        n0 = len(llm.calls())
        with progress:
            task = progress.add_task("rank", total=passes * len(papers))
            scores = rank_papers(brief, papers, llm, mode=mode, embedder=embedder, batch=args.batch or None,
                                 on_done=lambda n: progress.advance(task, n))
    finally:
        if started_server and not args.keep_server:
            llm.local_llm.stop()
    for s in scores:
        print(json.dumps(s.model_dump()), flush=True)
    calls = llm.calls()[n0:]
    err.print(f"kept {sum(s.kept for s in scores)}/{len(scores)} (score >= 8), "
              f"{sum(s.error is not None for s in scores)} not judged; {len(calls)} LLM calls "
              f"({sum(c.cached for c in calls)} cached), {sum(c.prompt_tokens for c in calls)} prompt + "
              f"{sum(c.completion_tokens for c in calls)} completion tokens", highlight=False)
    return 0

