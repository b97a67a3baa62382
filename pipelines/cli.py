"""`researchloop`: the loop from the command line, over the same assets the UI runs.

  researchloop run --topic NAME [--rounds N]   set up a topic and run rounds headless: the
                                               sensors' jobs (one run per round), their stop rules;
                                               --cancel-queued cancels the topic's queued runs first
  researchloop status                          topics, rounds done, best result, tokens
  researchloop lineage IDEA_ID                 how an idea arose, what it changed and scored
  researchloop lineage TOPIC                   the topic's best code round by round (stacked wins)
  researchloop rank --topic T --papers F.jsonl rank a paper list for a topic (JSON lines out)
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
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


# materialize_stage (one asset, one run) is what bench/parallel_bench.py times; `run` launches whole jobs
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


# The CLI's log folder under DAGSTER_HOME. Not `logs/`: Dagster owns that one (its telemetry
# log), and every dagster-daemon, the one `make ui` starts included, renames `logs/` to
# `.logs_queue/` on start to upload its files, whatever dagster.yaml says about telemetry.
LOG_DIR = "cli_logs"


def _log_path():
    """A fresh log file for one CLI run under $DAGSTER_HOME/cli_logs/."""
    from resources.paths import under_home

    return under_home(LOG_DIR) / f"cli-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


@contextlib.contextmanager
def stderr_to(path):
    """Send this process's stderr, and that of every process it starts (Dagster's step
    processes, the forkserver), to `path`: Python warnings and Dagster's event lines land in
    the log file; what the CLI prints itself goes to stdout."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "a", buffering=1) as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def executor_config(parallel: int) -> dict:
    """In-process steps for --parallel 1; else Dagster's multiprocess executor, at most `parallel`
    steps at once, each step's process forked from a server that has imported the code location
    and the libraries the steps import (great_expectations for the checks took ~14 s a process,
    sentence_transformers with torch ~24 s, on a busy 2-core machine). Only imported there, never
    run: torch starts its thread pools on first use, so forking after the import is safe."""
    if parallel <= 1:
        return {"execution": {"config": {"in_process": {}}}}
    preload = ["pipelines.definitions", "great_expectations", "openai", "mlflow", "sentence_transformers"]
    return {"execution": {"config": {"multiprocess": {
        "max_concurrent": parallel, "start_method": {"forkserver": {"preload_modules": preload}}}}}}


def stage_of(step_key: str) -> str:
    """The asset a step belongs to: 'papers' -> papers, 'run_results.run_idea_step[x]' -> run_results."""
    return step_key.split(".")[0].split("[")[0]


class RunReport:
    """What one run did, read from its events: stage status, wall time, LLM use, failures."""

    USAGE = ("llm_calls", "llm_cached_calls", "prompt_tokens", "completion_tokens", "cost_usd")

    def __init__(self, instance, run_id: str, stages: list[str]):
        import dagster as dg

        self.run_id, self.stages = run_id, stages
        run = instance.get_run_by_id(run_id)
        self.status = run.status.value if run else "UNKNOWN"
        spans: dict[str, list[float]] = {}
        states: dict[str, set[str]] = {}
        for st in instance.get_run_step_stats(run_id):
            stage = stage_of(st.step_key)
            states.setdefault(stage, set()).add(st.status.value if st.status else "IN_PROGRESS")
            if st.start_time:
                span = spans.setdefault(stage, [st.start_time, st.end_time or st.start_time])
                span[0] = min(span[0], st.start_time)
                span[1] = max(span[1], st.end_time or st.start_time)
        self.seconds = {s: round(b - a, 2) for s, (a, b) in spans.items()}
        self.state = {s: next((x for x in ("FAILURE", "IN_PROGRESS", "SUCCESS") if x in v), "SKIPPED")
                      for s, v in states.items()}
        self.usage: dict[str, dict] = {}
        self.failed_checks: list[str] = []
        self.check_details: dict[str, list[str]] = {}  # failed check -> what it says and what failed
        self.outcome: dict[str, dict] = {}  # asset -> the status / reason / error its materialisation reported
        self.errors: list[str] = []
        self.error_classes: list[str] = []
        events = dg.DagsterEventType
        for entry in instance.all_logs(run_id, of_type={events.ASSET_MATERIALIZATION, events.STEP_FAILURE,
                                                        events.ASSET_CHECK_EVALUATION, events.RUN_FAILURE}):
            ev = entry.dagster_event
            if ev.event_type == events.ASSET_MATERIALIZATION:
                mat = ev.step_materialization_data.materialization
                name = mat.asset_key.to_user_string()
                self.usage[name] = {k: v.value for k, v in mat.metadata.items() if k in self.USAGE}
                self.outcome[name] = {k: v.value for k, v in mat.metadata.items() if k in OUTCOME_KEYS}
            elif ev.event_type == events.ASSET_CHECK_EVALUATION:
                check = ev.event_specific_data
                if not check.passed:
                    name = f"{check.asset_key.to_user_string()}.{check.check_name}"
                    self.failed_checks.append(name)
                    self.check_details[name] = check_lines(check)
            elif ev.event_type == events.STEP_FAILURE:
                err = ev.step_failure_data.error
                inner = innermost_error(err)
                self.error_classes.append(inner.cls_name if inner else "")
                self.errors.append(f"{ev.step_key}: {error_text(inner) if inner else entry.user_message or 'failed'}")
            elif ev.event_type == events.RUN_FAILURE and not self.errors:
                inner = innermost_error(getattr(ev.event_specific_data, "error", None))
                self.error_classes.append(inner.cls_name if inner else "")
                self.errors.append(error_text(inner) if inner else
                                   (entry.user_message or "run failed").strip().splitlines()[0])

    def failure_lines(self) -> list[str]:
        """What went wrong, as plain lines for the terminal: each failed step's own error (the user's
        exception under Dagster's wrappers, and where it was raised), each failed blocking check's
        description and failing values with the status and reason its asset reported."""
        lines = [e for e, cls in zip(self.errors, self.error_classes, strict=True)
                 if not (cls == "DagsterAssetCheckFailedError" and self.failed_checks)]
        for name in self.failed_checks:
            description, *failing = self.check_details[name]
            lines.append(f"check {name} failed" + (f": {description}" if description else ""))
            lines += [f"  {x}" for x in failing]
            asset = name.rsplit(".", 1)[0]
            said = self.outcome.get(asset, {})
            if said:
                lines.append(f"  {asset} reported " + "; ".join(f"{k}: {_one_line(v)}" for k, v in said.items() if v))
        return lines

    @property
    def ok(self) -> bool:
        return self.status == "SUCCESS"

    def stage_rows(self, partition: str) -> list[dict]:
        return [{"partition": partition, "asset": s, "status": self.state.get(s, "NOT_RUN"),
                 "ok": self.state.get(s) == "SUCCESS", "seconds": self.seconds.get(s, 0.0),
                 **self.usage.get(s, {})} for s in self.stages]

    def summary(self) -> str:
        marks = {"SUCCESS": "ok", "FAILURE": "FAILED", "SKIPPED": "skipped", "NOT_RUN": "not run"}
        return ", ".join(f"{s} {marks.get(self.state.get(s, 'NOT_RUN'), self.state.get(s, '').lower())}"
                         for s in self.stages)


OUTCOME_KEYS = ("status", "reason", "error")  # materialisation metadata that says how an asset's work went
ERROR_LINES = 3  # lines of the innermost error's message shown on the terminal


def _one_line(value, limit: int = 300) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def innermost_error(err):
    """The error a Dagster error wraps (SerializableErrorInfo): follow `cause` (raise ... from),
    and `context` out of Dagster's own wrappers, down to the user's exception."""
    while err is not None:
        nxt = err.cause or (err.context if (err.cls_name or "").startswith("Dagster") else None)
        if nxt is None:
            return err
        err = nxt
    return None


def error_text(err) -> str:
    """An error's own message (its first lines, without Dagster's module prefix) and where it was
    raised: the last frame of its stack."""
    lines = [x.rstrip() for x in (err.message or "").strip().splitlines() if x.strip()][:ERROR_LINES]
    text = " | ".join(lines) or err.cls_name or "failed"
    frame = next((f for f in reversed(err.stack or []) if f.strip().startswith("File ")), "")
    if frame:
        where = frame.strip().splitlines()[0]  # File "/path/x.py", line 12, in fn
        try:
            path, rest = where[len('File "'):].split('", line ', 1)
            lineno, _, fn = rest.partition(", in ")
            where = f"{os.path.relpath(path) if path.startswith(os.getcwd()) else path}:{lineno} in {fn}"
        except ValueError:
            pass
        text += f" (at {where})"
    return text


def check_descriptions() -> dict[str, str]:
    """'asset.check' -> the description its AssetCheckSpec gives."""
    from assets import ALL_ASSETS

    return {f"{spec.asset_key.to_user_string()}.{spec.name}": spec.description or ""
            for a in ALL_ASSETS for spec in a.check_specs}


def check_lines(evaluation) -> list[str]:
    """A failed check as lines: its description, then what failed: the expectations marked NO in
    assets/shared/checks.py's table with their unexpected counts, and any other metadata value."""
    name = f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}"
    lines = [evaluation.description or check_descriptions().get(name, "")]
    failing = []
    for key, value in (evaluation.metadata or {}).items():
        text = str(value.value)
        if key == "expectations":
            for row in text.splitlines():
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                if len(cells) == 4 and cells[2] == "NO":
                    failing.append(f"{cells[0]}" + (f" on {cells[1]}" if cells[1] else "")
                                   + (f": {cells[3]} unexpected" if cells[3] else ""))
        elif key != "rows":
            failing.append(f"{key}: {_one_line(text, 200)}")
    if failing:
        lines.append("failing: " + "; ".join(failing))
    return lines


class StageWatcher(threading.Thread):
    """Follows a run the CLI launched (found by a tag) and calls `on_stage(asset, seconds)` as
    each asset lands, so progress shows while the run goes on."""

    def __init__(self, tag: tuple[str, str], stages: list[str], on_stage):
        super().__init__(daemon=True)
        self.tag, self.stages, self.on_stage = tag, set(stages), on_stage
        self.done = threading.Event()
        self.seen: set[str] = set()
        self.run_id = None

    def poll(self, instance) -> None:
        import dagster as dg

        if self.run_id is None:
            ids = instance.get_run_ids(dg.RunsFilter(tags=dict([self.tag])), limit=1)
            if not ids:
                return
            self.run_id = ids[0]
        landed = [e for e in instance.all_logs(self.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
                  if e.dagster_event.asset_key.to_user_string() in self.stages - self.seen]
        if not landed:
            return
        starts: dict[str, float] = {}  # when each stage's first step started
        for st in instance.get_run_step_stats(self.run_id):
            if st.start_time:
                stage = stage_of(st.step_key)
                starts[stage] = min(starts.get(stage, st.start_time), st.start_time)
        for entry in landed:
            name = entry.dagster_event.asset_key.to_user_string()
            if name not in self.seen:
                self.seen.add(name)
                self.on_stage(name, entry.timestamp - starts.get(name, entry.timestamp))

    def run(self) -> None:
        import dagster as dg

        instance = dg.DagsterInstance.get()
        while not self.done.wait(1.0):
            try:
                self.poll(instance)
            except Exception:  # noqa: BLE001, S112  a read that meets a write in progress: next second
                continue

    def finish(self, instance) -> None:
        self.done.set()
        self.join(10)
        self.poll(instance)


def launch(job_fn, instance, partition_key: str, partitions_def, parallel: int, stages: list[str],
           on_stage) -> RunReport:
    """Run the code location's job `job_fn` for one partition, as the sensors would (same job, tags
    like theirs plus this process's pid), and report what it did."""
    import uuid

    import dagster as dg

    from pipelines.guards import TOPIC_TAG, owner_tags
    from resources.store import split_partition_key

    launch_tag = ("researchloop/launch", uuid.uuid4().hex)
    tags = {TOPIC_TAG: split_partition_key(partition_key)[0], "researchloop/launched_by": "cli",
            **partitions_def.get_tags_for_partition_key(partition_key), **owner_tags(), launch_tag[0]: launch_tag[1]}
    watcher = StageWatcher(launch_tag, stages, on_stage)
    watcher.start()
    try:
        with dg.execute_job(dg.reconstructable(job_fn), instance, run_config=executor_config(parallel), tags=tags,
                            raise_on_error=False) as result:
            run_id = result.run_id
    finally:
        watcher.finish(instance)
    return RunReport(instance, run_id, stages)


def setup_done(instance, topic: str) -> bool:
    """Whether the topic's set-up (brief and baseline) is materialised for its partition."""
    import dagster as dg

    from assets import TOPIC_ASSETS

    return all(topic in instance.get_materialized_partitions(dg.AssetKey(a.key.path)) for a in TOPIC_ASSETS)


def cmd_run(args) -> int:
    _ensure_home()
    log_path = _log_path()
    console = _console()
    console.print(f"log (warnings, Dagster events): {log_path}", highlight=False, soft_wrap=True)
    with stderr_to(log_path):
        return _run(args, console, log_path)


def _run(args, console, log_path=None) -> int:
    import dagster as dg
    from filelock import Timeout

    from pipelines.guards import set_aside_unrecorded_rounds, topic_lock
    from resources.paths import register_topic_dir, resolve_topic_dir
    from resources.store import record_store
    from schemas.topic import TopicSpecError, load_topic

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
    from pipelines.guards import (
        WAITING,
        cancel_queued_runs,
        daemon_state,
        fail_stale_runs,
        runs_in_flight,
        waiting_runs,
    )

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
    from pipelines.definitions import build_resources
    from pipelines.jobs import research_round_with_resources, topic_setup_with_resources
    from pipelines.loop import decide_next_round, round_finished
    from resources.devices import parallel_limit
    from resources.local_llm import server_status
    from resources.store import record_store

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
    from assets.shared.topics import stale_reason
    from schemas.topic import load_topic

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
        import json

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


VERDICT_COLOURS = {"improvement": "green", "maintenance": "yellow", "decline": "red", "failed": "magenta"}


def verdict_row(f, round_key: str, source: str) -> tuple:
    """One idea's row of the end-of-run table: round and idea, its source, the verdict, the metric
    against the code it was judged against (marked * when that is not the baseline) with the 95%
    interval of the difference, and the reason (cut by the table to the width left; the whole of
    it is in the record, the UI and `lineage`)."""
    from rich.text import Text

    from pipelines.debug_cli import plain

    def one_line(text: str, style: str = "") -> Text:  # names and reasons come from the LLM and scripts
        return Text(" ".join(plain(text).split()), style=style, no_wrap=True, overflow="ellipsis")

    stacked = f.reference not in ("", "baseline")
    if f.metric_value is None:
        metric = "no metric"
    else:
        ref = f.reference_value if f.reference_value is not None else f.baseline_value
        metric = f"{f.metric_value:.4f} vs {ref:.4f}{'*' if stacked else ''}"
        if f.ci_low is not None:
            metric += f" [{f.ci_low:+.4f}, {f.ci_high:+.4f}]"
    reason = f.reason.removeprefix(f"vs {f.reference}: ") if stacked else f.reason  # the caption names it
    return (one_line(f"{round_key} {f.name}"), one_line(source),
            Text(f.verdict, style=VERDICT_COLOURS.get(f.verdict, "")), metric, one_line(reason))


def verdict_table(topic: str, rows: list[tuple], references: dict[str, str] | None = None):
    """The end-of-run verdict table, one line per idea: the idea is cut at 28 characters and the
    reason to the width left (with an ellipsis); source, verdict and metric stay whole.
    `references`: round -> the best code its ideas were judged against, where not the baseline."""
    from rich import box
    from rich.table import Table

    caption = "\n".join(f"* {rk}: against {ref}" for rk, ref in (references or {}).items()) or None
    table = Table(title=f"{topic}: verdicts against the baseline (*: the best code an idea built on)",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, title_justify="left",
                  pad_edge=False, collapse_padding=True)
    table.add_column("idea", no_wrap=True, max_width=28)
    table.add_column("source", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("metric vs baseline [95% CI of diff]", no_wrap=True)
    table.add_column("reason")
    for row in rows:
        table.add_row(*row)
    return table


def print_verdicts(console, topic: str, rounds: list[str]) -> None:
    from resources.store import record_store
    from schemas.frames import from_frame
    from schemas.records import Feedback

    store = record_store()
    rows, references = [], {}
    for rk in rounds:
        df = store.read("feedback_summary", topic, rk)
        if df is None:
            continue
        ideas = store.read("filtered_ideas", topic, rk)
        sources = (dict(zip(ideas["idea_id"], ideas["source"], strict=True))
                   if ideas is not None and {"idea_id", "source"} <= set(ideas.columns) else {})
        for f in from_frame(df, Feedback):
            rows.append(verdict_row(f, rk, sources.get(f.idea_id, "")))
            if f.reference not in ("", "baseline"):
                value = "" if f.reference_value is None else f" ({f.reference_value:.4f})"
                references[rk] = f"the best code so far, {f.reference}{value}"
    console.print(verdict_table(topic, rows, references))


def cmd_status(args) -> int:
    _ensure_home()
    import dagster as dg
    from rich.table import Table

    from assets import ROUND_ASSETS
    from assets.feedback_summary.feedback import progress_rows
    from assets.shared.metadata import round_usage
    from assets.shared.partitions import multi_key
    from resources.store import record_store

    store = record_store()
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
        partition = run.tags.get("dagster/partition", "")
        console.print(f"  {run.status.value:<8} {run.job_name} {partition} ({run.run_id[:8]})")
    if any(run.status == dg.DagsterRunStatus.QUEUED for run in active):
        from pipelines.guards import daemon_state

        daemon = daemon_state(instance)
        console.print(f"queued runs start when a dagster-daemon does: {daemon.detail}" +
                      ("" if daemon.alive else "; `researchloop run` cancels its topic's queued runs"), highlight=False)
    return 0


def cmd_lineage(args) -> int:
    _ensure_home()
    from pipelines.lineage import lineage

    text = lineage(args.idea_id)
    print(text)
    return 0 if not text.startswith("unknown") else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="researchloop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="set up a topic and run rounds of the loop headless")
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
    s = sub.add_parser("status", help="topics, rounds done, best results")
    s.set_defaults(fn=cmd_status)
    l = sub.add_parser("lineage", help="how an idea arose, what it changed, what it scored")
    l.add_argument("idea_id", help="e.g. pointcloud_classification/r1/some_idea; a topic name prints its best "
                   "code round by round (stacked wins)")
    l.set_defaults(fn=cmd_lineage)
    from pipelines import rank_cli

    rank_cli.add_parser(sub)   # researchloop rank
    from pipelines import debug_cli

    debug_cli.add_parser(sub)  # researchloop debug
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
