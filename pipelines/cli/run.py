"""`researchloop run --topic NAME`: set up a topic and run rounds of the loop headless, over the
same jobs the sensors launch (pipelines/launch.py), with the same decision whether another round
starts (pipelines/loop.py `decide_next_round`); a verdict table at the end."""
from __future__ import annotations

import json
import os
import time

import dagster as dg
from filelock import Timeout
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from assets import ROUND_ASSETS, TOPIC_ASSETS
from assets.shared.partitions import (
    multi_key,
    round_partitions,
    round_x_topic,
    topic_partitions,
)
from assets.shared.topics import stale_reason
from pipelines.cli.common import ensure_home, make_console, new_log_path, stderr_to
from pipelines.cli.verdicts import print_verdicts
from pipelines.definitions import build_resources
from pipelines.guards import (
    WAITING,
    cancel_queued_runs,
    daemon_state,
    fail_stale_runs,
    runs_in_flight,
    set_aside_unrecorded_rounds,
    topic_lock,
    waiting_runs,
)
from pipelines.launch import launch, research_round_with_resources, topic_setup_with_resources
from pipelines.loop import decide_next_round, round_finished
from resources.devices import parallel_limit
from resources.local_llm import server_status
from resources.paths import register_topic_dir, resolve_topic_dir
from resources.store import record_store
from schemas.topic import TopicSpecError, load_topic


def add_parser(subparsers) -> None:
    r = subparsers.add_parser("run", help="set up a topic and run rounds of the loop headless")
    r.add_argument("--topic", required=True, help="folder name under experiments/ or a path to a topic folder")
    r.add_argument("--rounds", type=int, default=0, help="rounds to run (default: the topic's budget)")
    r.add_argument("--start", type=int, default=1, help="first round number (default 1)")
    r.add_argument("--keep-server", action="store_true", help="leave the local LLM server running afterwards")
    r.add_argument("--timings", default="", help="write per-stage wall time and tokens to this JSON file")
    r.add_argument("--cancel-queued", action="store_true",
                   help="cancel the topic's runs waiting in Dagster's queue (a dagster-daemon, e.g. `make ui`'s, "
                        "would start them) and drive the topic from here; queued runs that no daemon is left to "
                        "start are canceled without it")
    r.add_argument("--parallel", type=int, default=0,
                   help="experiments run at once, one Dagster step per idea (default: $RESEARCHLOOP_MAX_PARALLEL, "
                        "else one per GPU, else one per core); 1 runs the steps in this process")
    r.set_defaults(fn=cmd_run)


def setup_done(instance, topic: str) -> bool:
    """Whether the topic's set-up (brief and baseline) is materialised for its partition."""
    return all(topic in instance.get_materialized_partitions(dg.AssetKey(a.key.path)) for a in TOPIC_ASSETS)


def cmd_run(args) -> int:
    ensure_home()
    log_path = new_log_path()
    console = make_console()
    console.print(f"log (warnings, Dagster events): {log_path}", highlight=False, soft_wrap=True)
    with stderr_to(log_path):
        return run_topic(args, console, log_path)


def run_topic(args, console, log_path=None) -> int:
    """Load the topic, take its lock, clear what is in the way (preflight), then drive it."""
    try:
        spec = load_topic(resolve_topic_dir(args.topic))
    except TopicSpecError as e:
        console.print(f"[red]cannot use topic {args.topic}:[/red] {e}")
        return 2
    register_topic_dir(spec.name, spec.path)  # a folder outside experiments/: the stages find it by name
    last = args.start + (args.rounds or spec.budget.rounds) - 1
    # --start/--rounds set this run's round budget; the other stop rules are the topic's own
    spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"rounds": last})})
    instance = dg.DagsterInstance.get()
    lock = topic_lock(spec.name)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        console.print(f"[red]{spec.name} is driven by another `researchloop run`[/red] (lock {lock.lock_file})")
        return 3
    try:
        if not preflight(console, instance, spec.name, cancel_queued=getattr(args, "cancel_queued", False)):
            return 3
        for rk in set_aside_unrecorded_rounds(instance, record_store(), spec.name, log=lambda m: None):
            console.print(f"{rk}: its end-of-round record was stored by a run that died before Dagster recorded it: "
                          "set aside, the round runs again", highlight=False)
        return drive(args, console, instance, spec, last, log_path)
    finally:
        lock.release()


def preflight(console, instance, topic: str, cancel_queued: bool = False) -> bool:
    """Before a loop drives `topic` (holding its lock): runs left behind by processes that are gone
    are cleaned up, each named on the terminal: a run marked running whose launcher or run worker is
    gone is marked failed; a run waiting in the queue with no dagster-daemon left to start it (the
    UI that queued it was stopped) is canceled, and so is any queued run of the topic when
    `cancel_queued` (--cancel-queued) says so. Returns False, having said what is in the way and how
    to go on, when a live run or a live daemon's queued run remains."""

    def say(line):
        console.print(line, highlight=False, markup=False)

    for run_id in fail_stale_runs(instance, topic, log=lambda m: None):
        say(f"run {run_id} was left running by a process that is gone: marked failed")
    daemon = daemon_state(instance)
    if waiting_runs(instance, topic) and (cancel_queued or not daemon.alive):
        why = "as --cancel-queued asked" if cancel_queued else f"{daemon.detail}, so nothing would ever start it"
        cancel_queued_runs(instance, topic, why, log=say)
    busy = runs_in_flight(instance, topic)
    if not busy:
        return True
    r = busy[0]
    console.print(f"[red]{topic} has a run in flight:[/red] {r.job_name} {r.tags.get('dagster/partition', '')} "
                  f"{r.status.value} (run {r.run_id})", highlight=False)
    if r.status in WAITING:
        say(f"  {daemon.detail} and starts queued runs when a slot is free: wait for it, or cancel the topic's "
            f"queued runs and drive it from here: researchloop run --topic {topic} --cancel-queued")
    else:
        say("  it is running: wait for it to finish, or terminate it in the UI (`make ui`, Runs) and run again")
    return False


def drive(args, console, instance, spec, last: int, log_path=None) -> int:
    """The loop: the topic's set-up if it is not done, then one research_round run per round while
    decide_next_round (the sensor's decision) allows; then the verdict table."""
    store = record_store()
    if spec.name not in instance.get_dynamic_partitions(topic_partitions.name):
        instance.add_dynamic_partitions(topic_partitions.name, [spec.name])
    llm = build_resources(resolved=True)["llm"]  # only to name the model and stop a server it starts
    started_server = llm.is_local() and not (server_status() or {}).get("alive")
    parallel = args.parallel or parallel_limit()
    os.environ["RESEARCHLOOP_MAX_PARALLEL"] = str(parallel)  # the step processes share out devices by it
    console.print(f"[bold]researchloop[/bold]: topic [cyan]{spec.name}[/cyan], rounds r{args.start}..r{last}, "
                  f"model {llm.model_name()} ({'local' if llm.is_local() else 'remote'}), "
                  f"experiments in parallel: {parallel}, DAGSTER_HOME={os.environ['DAGSTER_HOME']}")
    setup_stages = [a.key.to_user_string() for a in TOPIC_ASSETS]
    round_stages = [a.key.to_user_string() for a in ROUND_ASSETS]

    on_disk = load_topic(spec.path)  # as topic.yaml says (without --rounds): what the set-up captures
    stale = setup_done(instance, spec.name) and stale_reason(store.read("topic_brief", spec.name), on_disk)
    need_setup = not setup_done(instance, spec.name) or bool(stale)
    if stale:  # the set-up captures the spec and code every later stage uses
        console.print(f"{spec.name}: {stale}: its set-up runs again", highlight=False)
    t_start = time.monotonic()
    stages: list[dict] = []
    rounds: list[dict] = []
    failed = None
    stop_why = ""
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), console=console,
                        disable=not console.is_terminal)  # a live bar on a terminal; plain lines otherwise
    try:
        with progress:
            total = len(setup_stages) * need_setup + len(round_stages) * (last - args.start + 1)
            task = progress.add_task("starting", total=total)

            def on_stage(partition):
                def report(name, seconds):
                    console.print(f"  done {partition:<36} {name:<18} {seconds:6.1f}s", highlight=False)
                    progress.advance(task)
                return report

            if need_setup:
                progress.update(task, description=f"{spec.name} set-up")
                rep = launch(topic_setup_with_resources, instance, spec.name, topic_partitions, 1, setup_stages,
                             on_stage(spec.name))
                stages += rep.stage_rows(spec.name)
                console.print(f"set-up {'ok' if rep.ok else '[red]FAILED[/red]'} in {sum(rep.seconds.values()):.0f}s: "
                              f"{rep.summary()} (run {rep.run_id})", highlight=False, soft_wrap=True)
                if not rep.ok:
                    failed = ("set-up", rep)
            else:
                console.print(f"set-up of {spec.name} already materialised", highlight=False)
            n = args.start
            while failed is None:
                while n <= last and round_finished(store, spec.name, f"r{n}"):
                    console.print(f"r{n} already finished: not run again", highlight=False)
                    progress.advance(task, len(round_stages))
                    n += 1
                rk, why = decide_next_round(instance, spec, store, f"r{n - 1}" if n > 1 else None)
                if rk is None:
                    stop_why = why
                    break
                pk = str(multi_key(spec.name, rk))
                if rk not in instance.get_dynamic_partitions(round_partitions.name):
                    instance.add_dynamic_partitions(round_partitions.name, [rk])
                progress.update(task, description=f"{pk} round")
                t0 = time.monotonic()
                rep = launch(research_round_with_resources, instance, pk, round_x_topic, parallel, round_stages,
                             on_stage(pk))
                wall = time.monotonic() - t0
                stages += rep.stage_rows(pk)
                rounds.append({"round": rk, "partition": pk, "run_id": rep.run_id, "status": rep.status,
                               "seconds": round(wall, 1)})
                console.print(f"{rk} {'ok' if rep.ok else '[red]FAILED[/red]'} in {wall:.0f}s: {rep.summary()} "
                              f"(run {rep.run_id})", highlight=False, soft_wrap=True)
                if not rep.ok:
                    failed = (rk, rep)
                n += 1
    finally:
        if started_server and not args.keep_server:
            llm.local_llm.stop()
    total_s = time.monotonic() - t_start
    console.print(f"total {total_s:.0f}s")
    if stop_why:
        console.print(f"stopped before r{n}: {stop_why}", highlight=False)
    if args.timings:

        with open(args.timings, "w") as f:
            json.dump({"topic": spec.name, "rounds": rounds, "model": llm.model_name(), "parallel": parallel,
                       "stop_reason": stop_why, "total_s": round(total_s, 1), "stages": stages}, f, indent=1)
    print_verdicts(console, spec.name, [f"r{i}" for i in range(args.start, last + 1)])
    if failed:
        what, rep = failed
        console.print(f"[red]stopped: {what} failed[/red] (run {rep.run_id}; `make ui` shows it)", highlight=False)
        for line in rep.failure_lines()[:12]:
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
        if rep.failed_checks:
            console.print(f"  failed checks: {', '.join(rep.failed_checks)}", highlight=False)
        if log_path:
            console.print(f"  full log: {log_path}", highlight=False, soft_wrap=True)
        return 1
    return 0
