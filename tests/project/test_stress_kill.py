"""Stress: two loops on one DAGSTER_HOME, each killed with SIGKILL again and again, lose nothing.

Two toy topics (toy_a, toy_b: the test topic's logistic regression, each run ~0.4 s longer by a
sleep) are driven by one `researchloop run --rounds 2 --parallel 1` process each, at the same
time, on one Dagster instance (SQLite, a temp DAGSTER_HOME), with the real sandbox runner and a
scripted OpenAI-compatible server per topic (tests/support/fake_llm.py), so every request a loop makes
is logged. Each topic has a plan of kill points; at each one the loop is killed with SIGKILL
(its whole process group, or the process itself through the test hook in resources/safe_io.py
for the moments between a temp file and its rename), then started again. Kinds of kill point:

- `external`: the test sees the loop reach a state (a run started, a record or memo on disk, an
  experiment in its sandbox) and kills the process group at once;
- `llm`: the topic's fake server holds a chosen request and the loop is killed while it waits;
- `hook`: RESEARCHLOOP_TEST_KILL_BEFORE_RENAME makes the loop kill itself with a memo or record
  written to its temp file, not yet renamed into place.

After every other kill the round and topic sensors are ticked on the same instance (their run
requests are not launched: no daemon runs here): they must ask for nothing of the topic whose
loop is alive, and their stale-run cleanup marks the killed loop's run failed (after the other
kills the restarted CLI does that). At the end: both topics finished both rounds, no request
the cache held at a kill was asked again, no finished experiment or self-check ran again, no
run is left in flight, every killed run is failed, and every record is readable through the
RecordStore and materialised in Dagster's catalogue.

With RESEARCHLOOP_STRESS_RECORD=path the run's kill points and outcomes are written there as JSON
(bench/records/stress_kill.json)."""
from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import psutil
import pytest

from resources.llm import request_key
from resources.paths import REPO_ROOT
from resources.safe_io import KILL_BEFORE_RENAME
from tests.support.fake_llm import FakeLLMServer, Script
from tests.support.paths import FIXTURES
from tests.support.sandbox_fixtures import needs_bwrap

TOPICS = ("toy_a", "toy_b")
ROUNDS = ("r1", "r2")
TOPIC_RECORDS = ("topic_brief", "baseline_results")
DEADLINE_S = 900  # a hang guard: 764 s with the 2 cores loaded (bench/records/stress_kill.json); idle: not measured


def schema_of(req: dict) -> str | None:
    fmt = req.get("response_format") or {}
    return fmt.get("json_schema", {}).get("name") if fmt else None


def user_text(req: dict) -> str:
    return req["messages"][-1]["content"]


class TopicServer:
    """The scripted server for one topic: logs the cache key of every request it answers, gives
    the ideas a topic-specific title (so no request of one topic equals one of the other and is
    answered from the shared cache instead of reaching this server), and can hold the next
    request that `hold` matches until the loop that asked is killed."""

    def __init__(self, topic: str):
        self.topic = topic
        self.script = Script()
        self.asked: list[str] = []
        self.lock = threading.Lock()
        self.hold: Callable[[dict], bool] | None = None
        self.holding = threading.Event()
        self.release = threading.Event()
        self.server = FakeLLMServer(self)

    def answer(self, req: dict) -> str:
        with self.lock:
            self.asked.append(request_key(req))
            held = self.hold is not None and self.hold(req)
            if held:
                self.hold = None
        if held:
            self.holding.set()
            self.release.wait(60)  # the loop is killed meanwhile; its socket is gone when this returns
        text = self.script.answer(req)
        if schema_of(req) == "IdeaList":
            ideas = json.loads(text)["ideas"]
            for i in ideas:
                i["Title"] += f" ({self.topic})"
                i["Summary"] += f" For {self.topic}."
            text = json.dumps({"ideas": ideas})
        return text


@dataclass
class KillPoint:
    name: str
    kind: str  # external | llm | hook
    what: str
    when: Callable[[], bool] | None = None  # external: the state at which the loop is killed
    hold: Callable[[dict], bool] | None = None  # llm: the request the server holds
    hook: str = ""  # hook: the part of the path whose write kills the loop before its rename


@dataclass
class Loop:
    topic: str
    plan: list[KillPoint]
    server: TopicServer
    env: dict
    logs: Path
    proc: subprocess.Popen | None = None
    point: KillPoint | None = None
    started_at: float = 0.0
    launches: int = 0
    kills: list[dict] = field(default_factory=list)
    done: bool = False


def small_literature(path: Path) -> Path:
    """24 papers of the shipped corpus (12 on point sets, 12 others) as a dump: its index and
    embeddings take a moment, where the whole corpus took minutes with two loops building it."""
    rows = [json.loads(line) for line in (REPO_ROOT / "corpus" / "papers.jsonl").read_text().splitlines() if line]
    points = [r for r in rows if "point" in r["title"].lower()][:12]
    others = [r for r in rows if "point" not in r["title"].lower()][:12]
    path.write_text("".join(json.dumps(r) + "\n" for r in points + others))
    return path


def make_topic(experiments: Path, name: str, literature: Path) -> None:
    """The toy test topic under another name, its experiment ~0.4 s longer (a sleep), so a kill
    can land while it runs in the sandbox; papers from a small dump."""
    d = experiments / name
    shutil.copytree(FIXTURES / "toy_classification", d, ignore=shutil.ignore_patterns("__pycache__"))
    spec = (d / "topic.yaml").read_text()
    spec = spec.replace("name: toy_classification", f"name: {name}")
    spec = spec.replace("Toy 2D classification", f"Toy 2D classification ({name})")
    spec = spec.replace("logistic regression\n", f"logistic regression\n  (stress topic {name})\n")
    spec += f"literature: {{source: dump, path: {literature}}}\n"
    (d / "topic.yaml").write_text(spec)
    code = (d / "experiment.py").read_text()
    code = code.replace("import os\n", "import os\nimport time\n").replace(
        "    x, y = make_data(0)\n", "    time.sleep(0.4)\n    x, y = make_data(0)\n")
    (d / "experiment.py").write_text(code)


def test_a_record_killed_mid_write_leaves_the_old_one_and_no_false_topic(tmp_path):
    """Fast: a process killed (SIGKILL, through the write hook) between writing a record's temp
    file and renaming it leaves the old record readable, and nothing that RecordStore lists as a
    topic or a round. The store used to write `<topic>.tmp.parquet`, which topics() listed as a
    topic named `<topic>.tmp` whose file did not parse."""
    import polars as pl

    from resources.store import Store

    root = tmp_path / "records"
    Store(root).write(pl.DataFrame({"v": [1]}), "topic_brief", "toy_a")
    Store(root).write(pl.DataFrame({"v": [1]}), "feedback_summary", "toy_a", "r1")
    start = f"import polars as pl; from resources.store import Store; s = Store({str(root)!r}); "
    writes = {"/topic_brief/toy_a.parquet": "s.write(pl.DataFrame({'v': [2] * 9999}), 'topic_brief', 'toy_a')",
              "/feedback_summary/toy_a/r1.parquet":
                  "s.write(pl.DataFrame({'v': [2]}), 'feedback_summary', 'toy_a', 'r1')"}
    for part, write in writes.items():
        proc = subprocess.run([sys.executable, "-c", start + write], cwd=REPO_ROOT, capture_output=True, timeout=120,
                              env={**os.environ, KILL_BEFORE_RENAME: part})
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert len(list(root.glob("**/.*.tmp"))) == 2  # the temp files the kills left
    store = Store(root)
    assert store.topics() == ["toy_a"] and store.rounds("feedback_summary", "toy_a") == ["r1"]
    assert store.read("topic_brief", "toy_a")["v"].to_list() == [1]
    assert store.read("feedback_summary", "toy_a", "r1")["v"].to_list() == [1]


def test_a_feedback_record_its_dead_run_never_recorded_is_set_aside(home):
    """Fast: a round whose feedback record is on disk but whose materialisation Dagster lacks
    because its run died in between is set aside (and so runs again); a recorded round, and a
    record no run of this instance wrote, are left alone."""
    import polars as pl
    from dagster._core.test_utils import create_run_for_test

    from pipelines.guards import set_aside_unrecorded_rounds
    from resources.store import Store

    instance, store, topic = dg.DagsterInstance.get(), Store(), "toy_a"
    for rk in ("r1", "r2", "r3"):
        store.write(pl.DataFrame({"v": [1]}), "feedback_summary", topic, rk)
    instance.add_dynamic_partitions("topics", [topic])
    instance.add_dynamic_partitions("rounds", ["r1", "r2", "r3"])
    instance.report_runless_asset_event(dg.AssetMaterialization("feedback_summary", partition=f"r1|{topic}"))
    for rk in ("r1", "r2"):  # r1's run failed after recording, r2's died between the record and the event
        create_run_for_test(instance, job_name="research_round", status=dg.DagsterRunStatus.FAILURE,
                            tags={"dagster/partition": f"{rk}|{topic}"})
    assert set_aside_unrecorded_rounds(instance, store, topic, log=lambda m: None) == ["r2"]
    assert store.rounds("feedback_summary", topic) == ["r1", "r3"]
    assert (store.path("feedback_summary", topic, "r2").parent / ".r2.parquet.unrecorded").exists()


@pytest.mark.slow
@pytest.mark.extended  # many restarts of two loops; make test keeps one kill's resume (cli/test_resume.py)
@needs_bwrap
def test_kill_minus_nine_at_many_points_loses_nothing(home):
    from pipelines.guards import IN_FLIGHT, PID_TAG, TOPIC_TAG, lock_held
    from pipelines.sensors import round_sensor, topic_sensor
    from resources.store import RecordStore

    dh, ex = home / "dagster_home", home / "experiments"
    shutil.rmtree(ex / "toy_classification")
    papers = small_literature(home / "papers.jsonl")
    for t in TOPICS:
        make_topic(ex, t, papers)
    instance = dg.DagsterInstance.get()
    store = RecordStore()
    ws = dh / "workspaces"

    def rec(asset: str, topic: str, rk: str | None = None) -> bool:
        return store.path(asset, topic, rk).exists()

    def runs(topic: str, job: str, rk: str | None = None) -> list:
        """The topic's STARTED run records of `job` (of round `rk`)."""
        tags = {TOPIC_TAG: topic, **({"dagster/partition": f"{rk}|{topic}"} if rk else {})}
        return [r for r in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED],
                                                                   job_name=job, tags=tags))]

    def started_for(topic: str, job: str, rk: str | None, seconds: float) -> bool:
        return any(r.start_time and time.time() - r.start_time >= seconds for r in runs(topic, job, rk))

    def memos(folder: Path, prefix: str) -> list[Path]:
        return sorted(folder.glob(f"{prefix}-*.json")) if folder.is_dir() else []

    def idea_folders(topic: str) -> list[Path]:
        return [ws / topic / "baseline", *sorted(d for d in (ws / topic).glob("r*/*") if d.is_dir())]

    def logs_in(folder: Path, prefix: str = "") -> list[str]:
        d = folder / "logs"
        return sorted(p.name for p in d.glob(f"{prefix}*.stdout.log")) if d.is_dir() else []

    a, b = "toy_a", "toy_b"
    plans = {
        a: [
            KillPoint("a_setup_run_started", "external", "topic_setup run STARTED, topic_brief not stored yet",
                      when=lambda: bool(runs(a, "topic_setup")) and not rec("topic_brief", a)),
            KillPoint("a_topic_brief_record_before_rename", "hook",
                      "topic_brief's Parquet record in its temp file, not renamed",
                      hook=f"/records/topic_brief/{a}.parquet"),
            KillPoint("a_r1_papers_stage", "external", "r1 running for 1 s, papers not stored (corpus search)",
                      when=lambda: started_for(a, "research_round", "r1", 1.0) and not rec("papers", a, "r1")),
            KillPoint("a_r1_check_memo_before_rename", "hook",
                      "the 2nd idea's self-check memo in its temp file, not renamed (1st idea's check done)",
                      hook=f"/workspaces/{a}/r1/longer_training_r1/check-"),
            KillPoint("a_r1_repair_request_in_flight", "llm",
                      "run_results: the failed idea's repair request asked, its answer held",
                      hold=lambda req: "running it failed with" in user_text(req)),
            KillPoint("a_r1_feedback_just_stored", "external",
                      "r1's feedback_summary record just renamed into place (its Dagster event, the "
                      "run's end or r2's launch next)", when=lambda: rec("feedback_summary", a, "r1")),
            KillPoint("a_r2_ideas_request_in_flight", "llm", "r2 ideas: the IdeaList request asked, answer held",
                      hold=lambda req: schema_of(req) == "IdeaList"),
        ],
        b: [
            KillPoint("b_task_attributes_request_in_flight", "llm",
                      "set-up: topic_brief's TaskAttributes request asked, answer held",
                      hold=lambda req: schema_of(req) == "TaskAttributes"),
            KillPoint("b_baseline_in_sandbox", "external", "the baseline experiment running in the sandbox",
                      when=lambda: bool(logs_in(ws / b / "baseline")) and not memos(ws / b / "baseline", "result")),
            KillPoint("b_baseline_memo_before_rename", "hook",
                      "the baseline's result memo in its temp file, not renamed",
                      hook=f"/workspaces/{b}/baseline/result-"),
            KillPoint("b_r1_paper_rankings_record_before_rename", "hook",
                      "r1 paper_rankings' record in its temp file, not renamed",
                      hook=f"/records/paper_rankings/{b}/r1.parquet"),
            KillPoint("b_r1_novelty_request_in_flight", "llm",
                      "filtered_ideas: a NoveltyJudgement request asked, answer held",
                      hold=lambda req: schema_of(req) == "NoveltyJudgement"),
            KillPoint("b_r1_result_memo_before_rename", "hook",
                      "the 1st idea's result memo in its temp file, not renamed",
                      hook=f"/workspaces/{b}/r1/negative_step_r1/result-"),
            KillPoint("b_r1_feedback_record_before_rename", "hook",
                      "r1 feedback_summary's record in its temp file, not renamed",
                      hook=f"/records/feedback_summary/{b}/r1.parquet"),
            KillPoint("b_r2_patched_code_stage", "external",
                      "r2 patched_code running (plans stored, patches not; self-checks in the sandbox)",
                      when=lambda: rec("experiment_plans", b, "r2") and not rec("patched_code", b, "r2")),
        ],
    }
    names = [k.name for p in plans.values() for k in p]
    assert len(set(names)) == len(names) >= 10

    t0, load_before = time.monotonic(), os.getloadavg()
    record: dict = {"kills": [], "sensor_ticks": []}
    cursors: dict[str, str | None] = {"round": None}
    stale_marked_by_sensor: set[str] = set()
    with contextlib.ExitStack() as stack:
        loops = {}
        for t in TOPICS:
            srv = TopicServer(t)
            stack.enter_context(srv.server)
            env = {**os.environ, "OPENAI_BASE_URL": srv.server.base_url, "OPENAI_API_KEY": "sk-test",
                   "RESEARCHLOOP_MODEL": "fake-model", "RESEARCHLOOP_EDIT_FORMAT": "whole",
                   "DAGSTER_HOME": str(dh), "RESEARCHLOOP_EXPERIMENTS": str(ex)}
            env.pop(KILL_BEFORE_RENAME, None)
            loops[t] = Loop(t, list(plans[t]), srv, env, home / f"out-{t}")
            loops[t].logs.mkdir()

        def launch(lp: Loop) -> None:
            lp.point = lp.plan.pop(0) if lp.plan else None
            env = dict(lp.env)
            lp.server.hold, lp.server.holding, lp.server.release = None, threading.Event(), threading.Event()
            if lp.point and lp.point.kind == "hook":
                env[KILL_BEFORE_RENAME] = lp.point.hook
            if lp.point and lp.point.kind == "llm":
                lp.server.hold = lp.point.hold
            lp.launches += 1
            out = open(lp.logs / f"launch-{lp.launches}.txt", "w")  # noqa: SIM115  closed with the process
            lp.proc = subprocess.Popen(
                [sys.executable, "-m", "pipelines.cli", "run", "--topic", lp.topic, "--rounds", "2", "--parallel",
                 "1"], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True)
            out.close()
            lp.started_at = time.monotonic()

        def output(lp: Loop, n: int | None = None) -> str:
            return (lp.logs / f"launch-{n or lp.launches}.txt").read_text()

        def snapshot(topic: str) -> dict:
            """Cached requests; per idea folder the runs behind its finished experiment and self-check
            (`done`), and the runs made towards ones not finished, whose memo is not written (`cut`)."""
            cache = {p.stem for p in (dh / "llm_cache").glob("*/*.json")}
            done, cut = {}, {}
            for folder in idea_folders(topic):
                for kind, prefix in (("result", "attempt-"), ("check", "check-")):
                    made = logs_in(folder, prefix)
                    if memos(folder, kind):
                        done[f"{folder.relative_to(ws)}:{kind}"] = made
                    elif made:
                        cut[f"{folder.relative_to(ws)}:{kind}"] = len(made)
            return {"cache": cache, "done": done, "cut": cut}

        def tick_sensors(killed: str) -> dict:
            """One tick of each sensor, as the daemon would make it, on the shared instance. A loop
            that has not taken its topic's lock yet (still starting) does not count as driving it."""
            locked = {t for t in TOPICS if lock_held(t)}
            before = {r.run_id for r in instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT))}
            rs = round_sensor(dg.build_sensor_context(instance=instance, cursor=cursors["round"]))
            cursors["round"] = rs.cursor
            ts = topic_sensor(dg.build_sensor_context(instance=instance))
            asked = [(r.tags.get(TOPIC_TAG), r.partition_key) for r in [*rs.run_requests, *ts.run_requests]]
            for topic, pk in asked:
                assert topic not in locked, f"a sensor asked for {pk} while a loop drives {topic}"
            now_failed = [rid for rid in before
                          if instance.get_run_by_id(rid).status == dg.DagsterRunStatus.FAILURE]
            stale_marked_by_sensor.update(now_failed)
            return {"after_kill_of": killed, "requests": [pk for _, pk in asked], "marked_failed": now_failed}

        def after_kill(lp: Loop, how: str) -> None:
            kp = lp.point
            lp.proc.wait(30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(lp.proc.pid, signal.SIGKILL)  # anything of the group a self-kill left
            assert lp.proc.returncode == -signal.SIGKILL, (kp.name, lp.proc.returncode, output(lp)[-3000:])
            # the group's SIGKILL lands asynchronously: a child holding the lock's descriptor may
            # take a moment to die (CI of cecefb9 saw the lock held right after killpg)
            deadline = time.monotonic() + 15
            while lock_held(lp.topic) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not lock_held(lp.topic), f"{kp.name}: the dead loop's topic lock is still held"
            # the sandboxed experiment dies with the loop (bwrap --die-with-parent)
            deadline = time.monotonic() + 10
            while (left := [p.pid for p in psutil.process_iter(["cmdline"])
                            if any(f"/workspaces/{lp.topic}/" in c for c in (p.info["cmdline"] or []))]) \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not left, f"{kp.name}: processes of the killed loop's sandbox survive: {left}"
            in_flight = [r for r in instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT, tags={TOPIC_TAG: lp.topic}))]
            entry = {"point": kp.name, "kind": kp.kind, "what": kp.what, "topic": lp.topic, "how": how,
                     "launch": lp.launches, "t_s": round(time.monotonic() - t0, 1),
                     "alive_s": round(time.monotonic() - lp.started_at, 1),
                     "runs_left_in_flight": [f"{r.job_name} {r.tags.get('dagster/partition', '')} {r.status.value}"
                                             for r in in_flight],
                     "left_run_ids": [r.run_id for r in in_flight],
                     "records_on_disk": sorted(str(p.relative_to(dh / "records"))
                                               for p in (dh / "records").glob(f"*/{lp.topic}*")
                                               if p.suffix == ".parquet")
                     + sorted(str(p.relative_to(dh / "records")) for p in (dh / "records").glob(f"*/{lp.topic}/*")),
                     "feedback_in_catalogue": sorted(
                         pk for pk in instance.get_materialized_partitions(dg.AssetKey("feedback_summary"))
                         if pk.endswith(f"|{lp.topic}")),
                     "asked_before": len(lp.server.asked), **snapshot(lp.topic)}
            assert all(r.tags.get(PID_TAG) == str(lp.proc.pid) for r in in_flight), entry["runs_left_in_flight"]
            lp.kills.append(entry)
            if len(record["kills"]) % 2 == 1:  # every other kill: the sensors clean up before the loop restarts
                record["sensor_ticks"].append(tick_sensors(kp.name))
            record["kills"].append(entry)

        for lp in loops.values():
            launch(lp)
        while not all(lp.done for lp in loops.values()):
            assert time.monotonic() - t0 < DEADLINE_S, (
                f"not finished in {DEADLINE_S}s; pending: "
                + "; ".join(f"{lp.topic}: {lp.point.name if lp.point else 'finish'}" for lp in loops.values()))
            for lp in loops.values():
                if lp.done:
                    continue
                kp, code = lp.point, lp.proc.poll()
                if code is not None:
                    if kp is None:  # the last launch, with no kill planned: it must finish
                        assert code == 0, output(lp)[-4000:]
                        lp.done = True
                        continue
                    assert kp.kind == "hook", f"{kp.name}: the loop ended ({code}) before its kill point\n" \
                        + output(lp)[-4000:]
                    after_kill(lp, "SIGKILL from the write hook, before the rename")
                    launch(lp)
                elif kp is not None and kp.kind == "external" and kp.when():
                    os.killpg(lp.proc.pid, signal.SIGKILL)
                    after_kill(lp, "kill -9 of the process group by the test")
                    launch(lp)
                elif kp is not None and kp.kind == "llm" and lp.server.holding.is_set():
                    os.killpg(lp.proc.pid, signal.SIGKILL)
                    lp.server.release.set()
                    after_kill(lp, "kill -9 of the process group while the server held its request")
                    launch(lp)
            time.sleep(0.05)
    elapsed = time.monotonic() - t0

    # both topics finished both rounds, each in its last launch
    for t, lp in loops.items():
        out = output(lp)
        assert "verdicts against the baseline" in out and "round budget spent" in out, out[-3000:]
        assert [k["point"] for k in lp.kills] == [k.name for k in plans[t]]

    # no run is left in flight; every run a kill left behind is failed, by the sensor or by the CLI
    assert instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT)) == []
    left = {rid: k for k in record["kills"] for rid in k["left_run_ids"]}
    for rid, k in left.items():
        run = instance.get_run_by_id(rid)
        assert run.status == dg.DagsterRunStatus.FAILURE, (k["point"], run.status)
        msg = instance.all_logs(rid, of_type=dg.DagsterEventType.RUN_FAILURE)[-1].dagster_event.message
        assert "is gone" in msg, (k["point"], msg)
    cleaned_by_cli = {rid for lp in loops.values() for n in range(2, lp.launches + 1)
                      for rid in re.findall(r"run (\S+) was left running by a process that is gone", output(lp, n))}
    assert set(left) == stale_marked_by_sensor | cleaned_by_cli
    assert stale_marked_by_sensor and cleaned_by_cli  # both clean-ups took part
    set_aside = [line for lp in loops.values() for n in range(2, lp.launches + 1) for line in output(lp, n).splitlines()
                 if "set aside, the round runs again" in line]

    # every record is readable through the RecordStore and in Dagster's catalogue
    from assets import ROUND_ASSETS

    round_records = [a.key.to_user_string() for a in ROUND_ASSETS]
    assert store.topics() == list(TOPICS)
    for t in TOPICS:
        assert store.rounds("feedback_summary", t) == list(ROUNDS)
        for asset in TOPIC_RECORDS:
            df = store.read(asset, t)
            assert df is not None and df.height == 1, (asset, t)
            assert t in instance.get_materialized_partitions(dg.AssetKey(asset)), (asset, t)
        for rk in ROUNDS:
            for asset in round_records:
                df = store.read(asset, t, rk)
                assert df is not None and df.height > 0, (asset, t, rk)
                assert f"{rk}|{t}" in instance.get_materialized_partitions(dg.AssetKey(asset)), (asset, t, rk)
        for rk in ROUNDS:  # each idea judged once (a round that ran again replaced its record, added nothing)
            ids = store.read("feedback_summary", t, rk)["idea_id"].to_list()
            assert ids and len(set(ids)) == len(ids) and all(i.startswith(f"{t}/{rk}/") for i in ids), ids

    # nothing finished was done again: no request cached at a kill was asked after it, no
    # experiment or self-check with a memo at a kill ran again after it
    repeats, rerun = [], []
    for lp in loops.values():
        for k in lp.kills:
            later = lp.server.asked[k["asked_before"]:]
            repeats += [(k["point"], key[:12]) for key in later if key in k["cache"]]
            now = snapshot(lp.topic)["done"]
            rerun += [(k["point"], what, sorted(set(now.get(what, [])) - set(runs_then)))
                      for what, runs_then in k["done"].items() if now.get(what, []) != runs_then]
    assert not repeats, f"answered and cached requests asked again: {repeats}"
    assert not rerun, f"finished experiments or self-checks ran again: {rerun}"
    # and each finished experiment (self-check) ran exactly as often as its memo says, plus the
    # runs made towards it before a kill that came before its memo was written
    experiments = {}
    for lp in loops.values():
        for folder in idea_folders(lp.topic):
            for kind, prefix in (("result", "attempt-"), ("check", "check-")):
                found = memos(folder, kind)
                if not found:
                    continue
                what = f"{folder.relative_to(ws)}:{kind}"
                runs_in_memo = sum(json.loads(m.read_text()).get("n_attempts", 1) for m in found)
                cut = max([k["cut"].get(what, 0) for k in lp.kills], default=0)
                made = len(logs_in(folder, prefix))
                experiments[what] = {"runs_in_memo": runs_in_memo, "runs_cut_short_by_a_kill": cut,
                                     "runs_logged": made}
                assert made == runs_in_memo + cut, (what, experiments[what])

    if path := os.environ.get("RESEARCHLOOP_STRESS_RECORD"):
        asked = {t: lp.server.asked for t, lp in loops.items()}
        result = {
            "what": "tests/project/test_stress_kill.py: two `researchloop run` loops (toy_a, toy_b, 2 rounds each, "
                    "--parallel 1) on one DAGSTER_HOME, SIGKILLed at each kill point and restarted; sensors "
                    "ticked in the test process after every other kill (their requests not launched)",
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"2-core shared VM ({os.cpu_count()} CPUs seen, Python {platform.python_version()})",
            "in_sample": "not a sample: a fault-injection run, nothing is measured against data",
            "wall_s": round(elapsed, 1),
            "load_average_1_5_15min": {"before": [round(x, 1) for x in load_before],
                                       "after": [round(x, 1) for x in os.getloadavg()]},
            "kill_points": [{k: v for k, v in e.items() if k not in ("cache", "done", "cut", "left_run_ids",
                                                                   "asked_before")}
                            for e in record["kills"]],
            "sensor_ticks": record["sensor_ticks"],
            "launches_per_topic": {t: lp.launches for t, lp in loops.items()},
            "runs_per_topic": {t: {s.value: len(instance.get_runs(dg.RunsFilter(statuses=[s], tags={TOPIC_TAG: t})))
                                   for s in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)}
                               for t in TOPICS},
            "stale_runs_marked_failed": {"by_sensor_tick": len(stale_marked_by_sensor),
                                         "by_restarted_cli": len(cleaned_by_cli)},
            "feedback_records_set_aside_by_restarted_cli": set_aside,
            "llm_requests": {t: {"asked": len(v), "distinct": len(set(v))} for t, v in asked.items()},
            "llm_requests_repeated_after_a_kill_though_cached": len(repeats),
            "experiments": experiments,
            "finished_experiments_or_checks_rerun": len(rerun),
            "recomputations_found": len(repeats) + len(rerun),
        }
        Path(path).write_text(json.dumps(result, indent=1) + "\n")

