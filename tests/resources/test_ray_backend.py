"""The Ray experiment backend (resources/ray_backend.py).

Fast: packing a workspace, sending back what a run changed, writing it into the step's workspace
safely, and mapping the worker's reply onto a ProcessResult. Slow: a real Ray cluster on this
machine (a head with no CPUs and worker nodes holding a custom `gpu_slot` resource standing for a
GPU): toy experiments run through run_with_repair with the Ray backend, a worker node is killed
in the middle of an attempt (retried on the other node), a kill with no retries left is recorded
as a failure with its reason, and a whole round with the fake LLM runs its experiments there."""
import os
import re
import threading
from pathlib import Path

import pytest

from resources.ray_backend import (
    LOST,
    apply,
    delta,
    lost_result,
    map_paths,
    pack,
    parse_resources,
    result_from_worker,
    snapshot,
    task_options,
    worker_env,
)
from tests.support import paths
from tests.support.ray_cluster import LocalCluster
from tests.support.sandbox_fixtures import needs_bwrap

FIXTURES = paths.FIXTURES


def _tree(root: Path) -> None:
    (root / "out" / "sub").mkdir(parents=True)
    (root / "experiment.py").write_text("print('hi')\n")
    (root / "data.csv").write_text("a,b\n1,2\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "out" / "sub" / "x.txt").write_text("x")
    os.symlink("data.csv", root / "link")


# --------------------------------------------------------------------------- pure parts

def test_pack_and_apply_rebuild_the_same_tree(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir(), dst.mkdir()
    _tree(src)
    assert apply(dst, pack(src)) == []
    assert snapshot(dst) == snapshot(src)
    assert os.readlink(dst / "link") == "data.csv" and os.access(dst / "run.sh", os.X_OK)


def test_delta_sends_back_changes_and_deletions_within_the_cap(tmp_path):
    ws, host = tmp_path / "ws", tmp_path / "host"
    ws.mkdir(), host.mkdir()
    _tree(ws)
    apply(host, pack(ws))
    before = snapshot(ws)
    (ws / "out" / "final_info.json").write_text('{"accuracy": 0.9}')    # new
    (ws / "data.csv").write_text("tampered")                              # changed topic file
    (ws / "run.sh").unlink()                                              # deleted
    (ws / "out" / "big.bin").write_bytes(b"\0" * 5000)                   # new, over the cap below
    files, gone = delta(before, ws, max_bytes=1000)
    kinds = {rel: kind for rel, kind, _, _ in files}
    assert kinds == {"out/final_info.json": "file", "data.csv": "file", "out/big.bin": "omitted"}
    assert gone == ["run.sh"]
    apply(host, files, gone)
    assert (host / "out" / "final_info.json").read_text() == '{"accuracy": 0.9}'
    assert (host / "data.csv").read_text() == "tampered" and not (host / "run.sh").exists()
    assert "5000 bytes, over the cap" in (host / "out" / "big.bin").read_text()  # a note, never the bytes
    # a changed file over the cap still reads as changed on the host (the integrity check sees it)
    before = snapshot(ws)
    (ws / "experiment.py").write_text("y" * 3000)
    files, _ = delta(before, ws, max_bytes=1000)
    apply(host, files)
    assert snapshot(host)["experiment.py"] != before["experiment.py"]


def test_apply_never_writes_through_a_link_or_outside_the_workspace(tmp_path):
    host, outside = tmp_path / "host", tmp_path / "outside"
    host.mkdir(), outside.mkdir()
    os.symlink(outside, host / "out")             # made by an earlier run: a link out of the workspace
    entries = [("out/final_info.json", "file", b"{}", 0o644), ("../escape.txt", "file", b"x", 0o644),
               ("/tmp/abs.txt", "file", b"x", 0o644), ("a/../../b", "file", b"x", 0o644),
               ("fifo", "special", "prw-r--r--", 0)]
    refused = apply(host, entries, gone=["out/keep.txt", "../outside"])
    assert set(refused) == {"out/final_info.json", "../escape.txt", "/tmp/abs.txt", "a/../../b", "out/keep.txt",
                            "../outside"}
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.txt").exists() and outside.is_dir()
    assert "special file" in (host / "fifo").read_text()


def test_task_options_and_worker_environment():
    assert parse_resources(" gpu_slot=1, a100=0.5 ") == {"gpu_slot": 1.0, "a100": 0.5}
    with pytest.raises(ValueError, match="name=amount"):
        parse_resources("gpu_slot")
    opts = task_options(512, cpus=2, gpus=1, resources="gpu_slot=1", retries=3)
    assert opts["memory"] == 512 << 20 and opts["num_gpus"] == 1 and opts["resources"] == {"gpu_slot": 1.0}
    assert opts["max_retries"] == 3 and opts["retry_exceptions"] is False  # a lost worker only, not our errors
    env = worker_env({"CUDA_VISIBLE_DEVICES": "3", "FOO": "1"}, gpu_ids=[0, 1], cpus=2)
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "FOO": "1", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    assert worker_env({"CUDA_VISIBLE_DEVICES": "3"}, gpu_ids=[], cpus=0.5)["CUDA_VISIBLE_DEVICES"] == ""
    assert map_paths('File "/scratch/n1/attempt-x/attempt-1/experiment.py"', "/scratch/n1/attempt-x/attempt-1",
                     "/home/ws/attempt-1") == 'File "/home/ws/attempt-1/experiment.py"'


def test_result_from_worker_maps_the_reply_onto_the_step(tmp_path):
    host = tmp_path / "idea" / "attempt-1"
    host.mkdir(parents=True)
    (host / "experiment.py").write_text("x = 1\n")
    remote = "/scratch/node/attempt-abc/attempt-1"
    reply = {"remote_ws": remote, "node": "n", "host": "h", "gone": [],
             "files": [("out", "dir", None, 0o755), ("out/final_info.json", "file", b'{"accuracy": 0.5}', 0o644)],
             "logs": {"stdout": b"accuracy 0.5\n",
                      "stderr": f'Traceback\n  File "{remote}/experiment.py", line 1\nValueError: x\n'.encode()},
             "result": {"command": ["/venv/bin/python", f"{remote}/experiment.py"], "workdir": remote, "exit_code": 1,
                        "timed_out": False, "killed_reason": None, "duration_s": 1.5,
                        "stdout_path": "/scratch/x.log", "stderr_path": "/scratch/y.log", "stdout_tail": "",
                        "stderr_tail": "", "sandboxed": True, "peak_memory_mb": 12.0}}
    r = result_from_worker(reply, host)
    assert r.workdir == str(host) and r.exit_code == 1 and r.duration_s == 1.5 and r.peak_memory_mb == 12.0
    assert Path(r.stderr_path).parent == host.parent / "logs" and Path(r.stderr_path).is_file()
    assert f'File "{host}/experiment.py"' in r.stderr_tail and remote not in r.stderr_tail
    assert r.command[1] == f"{host}/experiment.py" and r.stdout_tail == "accuracy 0.5\n"
    assert (host / "out" / "final_info.json").read_text() == '{"accuracy": 0.5}'
    lost = lost_result(["python", "x.py"], host, "node died")
    assert lost.exit_code is None and lost.killed_reason == LOST and "node died" in lost.stderr_tail
    assert "node died" in Path(lost.stderr_path).read_text()


def test_runner_sends_attempts_to_ray_only_when_chosen(ws, monkeypatch):
    """RESEARCHLOOP_BACKEND=ray (read at each run) routes Runner.run to the backend with the
    resource's limits and the caller's extra hidden dirs; unset, the local sandbox runs it."""
    import resources.ray_backend as rb
    from resources.runner import Runner
    from resources.sandbox import sandbox_available

    seen = []
    monkeypatch.setattr(rb, "run_on_ray", lambda cmd, wd, **kw: seen.append((cmd, wd, kw)) or lost_result(cmd, wd, "x"))
    monkeypatch.setenv("RESEARCHLOOP_BACKEND", "ray")
    r = Runner(memory_mb=1000, max_procs=64).run(["python", "-c", "pass"], ws, timeout_s=5, hide=["/srv/labels"])
    assert r.killed_reason == LOST and len(seen) == 1
    cmd, wd, kw = seen[0]
    assert cmd == ["python", "-c", "pass"] and wd == ws and kw["memory_mb"] == 1000 and kw["hide"] == ["/srv/labels"]
    assert kw["limits"]["max_procs"] == 64 and kw["limits"]["sandbox"] is Runner().sandboxed()
    monkeypatch.setenv("RESEARCHLOOP_BACKEND", "local")
    if Runner().sandboxed() and not sandbox_available()[0]:
        return  # no bubblewrap here: the local half cannot run
    assert Runner().run(["python", "-c", "print(7)"], ws, timeout_s=30).stdout_tail.strip() == "7"
    assert len(seen) == 1


# --------------------------------------------------------------------------- a real cluster

SLOW_MARK = "# researchloop-ray-test: slow attempt"


def _slow(code: str, seconds: float) -> str:
    return f"{SLOW_MARK}\nimport time\ntime.sleep({seconds})\n{code}"


@pytest.fixture
def ray_cluster(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    import ray._private.ray_constants as rc

    # one machine: every Ray address on the loopback (the flag Ray uses for single-machine clusters)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setattr(rc, "ENABLE_RAY_CLUSTER", False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("RESEARCHLOOP_RAY_SCRATCH", str(scratch))  # read by the workers (they inherit it)
    c = LocalCluster(scratch)
    try:
        c.add()
        c.add()
        monkeypatch.setenv("RAY_ADDRESS", c.cluster.address)
        monkeypatch.setenv("RESEARCHLOOP_BACKEND", "ray")
        monkeypatch.setenv("RESEARCHLOOP_RAY_RESOURCES", "gpu_slot=1")
        monkeypatch.setenv("RESEARCHLOOP_RAY_RETRIES", "2")
        yield c
    finally:
        c.shutdown()


def _toy_target():
    from assets.run_results.experimenting import RunTarget
    from schemas.topic import load_topic

    spec = load_topic(FIXTURES / "toy_classification")
    return RunTarget.of_topic(spec), (FIXTURES / "toy_classification" / "experiment.py").read_text()


@pytest.mark.slow
@needs_bwrap
def test_attempts_run_on_the_cluster_and_survive_a_lost_worker(ray_cluster, tmp_path, monkeypatch):
    from assets.run_results.repair_search import RepairPolicy, run_with_repair
    from resources.runner import Runner

    target, code = _toy_target()
    ideas = {
        "baseline": code,
        "faster_lr": code.replace("LR = 0.05", "LR = 0.2"),
        "slow_one": _slow(code, 8),                               # its node is killed mid-run
        "broken": code.replace("EPOCHS = 30", "EPOCHS = EPOCH_COUNT"),  # fails, no repair budget
    }
    watcher = ray_cluster.kill_when_running(SLOW_MARK)
    results, errors = {}, []

    def run(name, c):
        try:
            results[name] = run_with_repair(target, c, runner=Runner(), workdir=tmp_path / "ws" / name,
                                            idea_id=name, title=name, log=lambda m: None,
                                            policy=RepairPolicy(memo=False))
        except Exception as e:  # noqa: BLE001 - recorded and asserted on below
            errors.append((name, e))

    threads = [threading.Thread(target=run, args=item) for item in ideas.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    watcher.join(timeout=5)
    assert not errors, errors
    assert set(results) == set(ideas)                               # every idea accounted for
    assert len(ray_cluster.killed) == 1                             # a node really died mid-attempt
    assert results["slow_one"].status == "success"                  # ... and the attempt ran again elsewhere
    # the killed run's folder stays behind on the dead node (a finished run removes its own), so the
    # success came from a second run on the other node
    killed_node, killed_folder = ray_cluster.killed[0]
    assert ray_cluster.attempts_with(SLOW_MARK) == [killed_folder]
    assert killed_node.node_id.startswith(killed_folder.parent.name) and killed_node not in ray_cluster.nodes_alive()
    for name in ("baseline", "faster_lr"):
        r = results[name]
        assert r.status == "success" and 0.5 < r.metric_value <= 1.0, r
        ws = tmp_path / "ws" / name / "attempt-1"
        assert (ws / "out" / "final_info.json").is_file()           # the worker's files came back
    broken = results["broken"]
    assert broken.status == "failed" and "NameError" in broken.attempts[0].error
    frame = broken.attempts[0].frames[0]                             # the traceback names the step's files
    assert frame.file == "experiment.py" and "EPOCH_COUNT" in broken.attempts[0].local_structure
    assert str(ray_cluster.scratch) not in broken.attempts[0].stderr_tail

    # no retries left: the kill is recorded as the attempt's failure, with its reason
    monkeypatch.setenv("RESEARCHLOOP_RAY_RETRIES", "0")
    ray_cluster.add()                                              # back to two nodes
    watcher = ray_cluster.kill_when_running(SLOW_MARK + " again")
    lost = run_with_repair(target, _slow(code, 8).replace(SLOW_MARK, SLOW_MARK + " again"), runner=Runner(),
                           workdir=tmp_path / "ws" / "lost", idea_id="lost", title="lost", log=lambda m: None,
                           policy=RepairPolicy(memo=False))
    watcher.join(timeout=5)
    assert len(ray_cluster.killed) == 1
    assert lost.status == "failed" and "Ray worker" in lost.attempts[0].error and "lost" in lost.attempts[0].error
    assert lost.attempts[0].exit_code is None


@pytest.mark.slow
@needs_bwrap
@pytest.mark.extended
def test_a_round_runs_its_experiments_on_the_cluster(ray_cluster, home, fake_llm):
    """set-up and round 1 of the toy topic with the fake LLM, every sandboxed run a Ray task; the
    node of the first attempt seen is removed while it runs; every idea has its result."""
    import dagster as dg

    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import Patch, RunResult
    from tests.support.resources import make_resources
    from tests.support.rounds import TOPIC, materialize_round, materialize_topic

    instance = dg.DagsterInstance.ephemeral()
    resources = make_resources(fake_llm.base_url, model="gpt-4o-mini")
    materialize_topic(instance, resources)
    logs = list((home / "dagster_home").rglob("*.stdout.log"))
    assert logs and all(re.search(r"-ray\d+\.stdout\.log$", p.name) for p in logs)  # the baseline ran on Ray
    watcher = ray_cluster.kill_when_running("", timeout=900, delay=0)  # any attempt of the round
    res = materialize_round(instance, resources, "r1")
    watcher.join(timeout=5)
    assert res.success
    assert len(ray_cluster.killed) == 1
    store = Store()
    patched = {p.idea_id for p in from_frame(store.read("patched_code", TOPIC, "r1"), Patch)}
    runs = {r.idea_id: r for r in from_frame(store.read("run_results", TOPIC, "r1"), RunResult)}
    assert set(runs) == patched and patched                          # every idea accounted for
    for r in runs.values():
        assert r.status in ("success", "failed", "not_implemented") and (r.status == "success" or r.reason or
                                                                           r.attempts and r.attempts[-1].error)
    assert sum(r.status == "success" for r in runs.values()) >= 1
    logs = list((home / "dagster_home").rglob("*.stdout.log"))       # every run of the round too: none local
    assert len(logs) > 3 and all(re.search(r"-ray\d+\.stdout\.log$", p.name) for p in logs)


SEEDY = """\
import argparse, json, os, time
p = argparse.ArgumentParser(); p.add_argument('--seed', type=int); p.add_argument('--out_dir')
a = p.parse_args(); os.makedirs(a.out_dir, exist_ok=True)
t0 = time.time(); time.sleep(8)
json.dump({'accuracy': 0.80 + 0.01 * a.seed, 't0': t0, 't1': time.time()},
          open(os.path.join(a.out_dir, 'final_info.json'), 'w'))
"""


@pytest.mark.slow
@needs_bwrap
def test_a_topics_execution_block_sends_its_seeds_to_the_nodes_with_its_resource(ray_cluster, tmp_path, monkeypatch):
    """The environment says nothing (local backend, no resources); topic.yaml says
    `execution: {backend: ray, resources: {gpu_slot: 1}}`. With a third node that has a CPU but
    no gpu_slot, every attempt (seed 0, then seeds 1 and 2 side by side) runs on Ray, on the two
    nodes holding a gpu_slot only."""
    from assets.run_results.repair_search import run_with_repair
    from assets.run_results.seeds import repeat_seeds
    from resources.runner import Runner
    from schemas.records import RunResult
    from schemas.topic import load_topic

    monkeypatch.delenv("RESEARCHLOOP_BACKEND")
    monkeypatch.delenv("RESEARCHLOOP_RAY_RESOURCES")
    plain = ray_cluster.add(resources={})
    topic = tmp_path / "seedy"
    topic.mkdir()
    (topic / "topic.yaml").write_text(
        "name: seedy\ntitle: T\ndescription: d\ncode: exp.py\nrun: python exp.py --seed {seed} --out_dir {out_dir}\n"
        "metric: {name: accuracy, goal: maximize}\nbudget: {seeds: 3, run_timeout_s: 120}\n"
        "execution: {backend: ray, resources: {gpu_slot: 1}}\n")
    (topic / "exp.py").write_text(SEEDY)
    spec = load_topic(topic)
    work = tmp_path / "work"
    first = run_with_repair(spec, SEEDY, runner=Runner(), workdir=work, idea_id="seedy/r1/x", title="x",
                            log=lambda m: None)
    r = repeat_seeds(spec, first, Runner(), work, log=lambda m: None, reference=0.5)
    assert r.status == "success" and r.seed_values == pytest.approx([0.80, 0.81, 0.82]), r
    logs = list(work.rglob("*.stdout.log"))
    assert len(logs) == 3 and all(re.search(r"-ray\d+\.stdout\.log$", p.name) for p in logs)  # all on Ray
    used = {d.name for d in (ray_cluster.scratch / "researchloop-ray").iterdir()}
    slots = {n.node_id[:16] for n in ray_cluster.nodes_alive() if n.node_id != plain.node_id}
    assert used and used <= slots and plain.node_id[:16] not in used       # only nodes with a gpu_slot
    s1, s2 = (RunResult.model_validate_json(next((work / f"seed-{k}").glob("result-*.json")).read_text()).metrics
              for k in (1, 2))
    assert s1["t0"] < s2["t1"] and s2["t0"] < s1["t1"]                    # seeds 1 and 2 ran at the same time
