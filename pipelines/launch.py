"""Launching the code location's jobs from a process of its own (`researchloop run`), and
reading back what a run did.

The jobs are built one way: `pipelines.jobs` defines them, `pipelines.definitions` binds them to
the resources, and `topic_setup_with_resources` / `research_round_with_resources` below resolve
them from there for `dg.reconstructable` (the multiprocess executor rebuilds the job in each
step's process). The sensors launch the same jobs from the daemon.

One responsibility, a run seen from outside: `launch` starts it, `StageWatcher` follows it while
it goes, `RunReport` reads its events afterwards (stage status, wall time, LLM use, the failures
under Dagster's wrappers, failed checks with their description)."""
from __future__ import annotations

import os
import threading
import uuid

import dagster as dg

from assets import ALL_ASSETS
from pipelines.definitions import defs
from pipelines.guards import TOPIC_TAG, owner_tags
from pipelines.jobs import research_round_job, topic_setup_job
from resources.store import split_partition_key


def topic_setup_with_resources() -> dg.JobDefinition:
    """topic_setup as the code location resolves it (with its resources), for
    `dg.reconstructable`: the CLI launches the same job the sensor launches."""
    return defs.resolve_job_def(topic_setup_job.name)


def research_round_with_resources() -> dg.JobDefinition:
    """research_round as the code location resolves it, for `dg.reconstructable` (the
    multiprocess executor rebuilds it in each step's process)."""
    return defs.resolve_job_def(research_round_job.name)


def executor_config(parallel: int) -> dict:
    """In-process steps for --parallel 1; else Dagster's multiprocess executor, at most `parallel`
    steps at once, each step's process forked from a server that has imported the code location
    and the libraries the steps import (great_expectations for the checks, sentence_transformers
    with torch: each costs seconds to import in every step process). Only imported there, never
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
                lines.append(f"  {asset} reported " + "; ".join(f"{k}: {one_line(v)}" for k, v in said.items() if v))
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


def one_line(value, limit: int = 300) -> str:
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
            failing.append(f"{key}: {one_line(text, 200)}")
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
