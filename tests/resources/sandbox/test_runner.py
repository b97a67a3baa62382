"""The sandboxed runner against hostile scripts: each test writes a script that tries to
break out (network, writes, secrets, fork storm, memory, time, output, orphans) and asserts
containment. Sandbox tests skip (with the reason) where bubblewrap cannot run."""
from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import resources.sandbox.run as sandbox_run
from resources.runner import Runner
from resources.safe_io import read_tail
from resources.sandbox import (
    REPO_ROOT,
    ProcessResult,
    build_env,
    default_hidden_paths,
    prepare_workspace,
    run_sandboxed,
    sandbox_available,
)
from tests.support.sandbox_fixtures import needs_bwrap


@pytest.fixture
def host_dir():
    """A world-writable dir outside /tmp (the sandbox gets its own /tmp, so a dir under /tmp
    would be invisible anyway and prove nothing): visible read-only inside the sandbox."""
    d = Path(tempfile.mkdtemp(prefix="runner-test-", dir="/var/tmp"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def script(ws: Path, body: str, name: str = "s.py") -> list[str]:
    (ws / name).write_text(textwrap.dedent(body))
    return ["python", name]


def procs_with(token: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if token.encode() in cmd and state != "Z":
                out.append(int(p))
    return out


# --------------------------------------------------------------------------- basics

@needs_bwrap
def test_normal_script_succeeds_and_writes_in_workspace(ws: Path):
    cmd = script(ws, """
        import json, os, pydantic
        os.makedirs("run_0", exist_ok=True)
        with open(os.path.abspath("run_0/final_info.json"), "w") as f:
            json.dump({"acc": 0.9}, f)
        open("/tmp/scratch", "w").write("tmp is private but writable")
        print("done", os.getcwd() == os.environ["HOME"])
    """)
    r = run_sandboxed(cmd, ws, timeout_s=60)
    assert isinstance(r, ProcessResult)
    assert r.exit_code == 0 and r.ok and r.sandboxed, r.stderr_tail
    assert not r.timed_out and r.killed_reason is None
    assert "done True" in r.stdout_tail
    out = ws / "run_0" / "final_info.json"
    assert out.read_text() == '{"acc": 0.9}'
    assert out.stat().st_uid == os.getuid()  # ownership handed back after the run
    # logs live next to the workspace, not in it
    assert Path(r.stdout_path).parent == ws.parent / "logs"
    assert Path(r.stdout_path).read_text() == r.stdout_tail
    # the sandbox's /tmp is private: its file is not on the host (a host folder of that name is no leak)
    assert not Path("/tmp/scratch").is_file() or Path("/tmp/scratch").read_text() != (
        "tmp is private but writable")


@needs_bwrap
def test_network_is_blocked(ws: Path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    cmd = script(ws, f"""
        import socket
        for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
            try:
                socket.create_connection((host, port), timeout=2).close()
                print("CONNECTED", host)
            except OSError as e:
                print("BLOCKED", host, type(e).__name__)
    """)
    try:
        r = run_sandboxed(cmd, ws, timeout_s=30)
        assert r.exit_code == 0, r.stderr_tail
        assert "CONNECTED" not in r.stdout_tail
        assert r.stdout_tail.count("BLOCKED") == 3
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the host's listener
    finally:
        listener.close()


@needs_bwrap
def test_writes_outside_workspace_fail(ws: Path, host_dir: Path, tmp_path: Path):
    token = uuid.uuid4().hex
    targets = [host_dir / f"escape-{token}", REPO_ROOT / f"escape-{token}.txt",
               tmp_path / f"escape-{token}", Path(sys.executable).parent / f"escape-{token}"]
    cmd = script(ws, f"""
        for p in {[str(t) for t in targets]!r}:
            try:
                open(p, "w").write("pwned")
                print("WROTE", p)
            except OSError as e:
                print("BLOCKED", p, e.errno)
    """)
    try:
        # host_dir is shown read-only (ro_paths): other host dirs are not in the sandbox at all
        r = run_sandboxed(cmd, ws, timeout_s=30, ro_paths=[host_dir])
        assert r.exit_code == 0, r.stderr_tail
        for t in targets:
            assert not t.exists(), t  # nothing reached the host
        # under /tmp the sandbox has its own tmpfs (as a normal user it may even create
        # files there: they vanish with the run); every other host path is read-only
        for t in targets[:2] + targets[3:]:
            assert f"WROTE {t}" not in r.stdout_tail
        # host_dir is mode 0777 on the host: only the read-only mount stops the write (EROFS)
        assert f"BLOCKED {targets[0]} 30" in r.stdout_tail
        # the repo: read-only (EROFS), or not there at all when the checkout lives under /tmp,
        # which the sandbox replaces with its own (EACCES/ENOENT in the empty private /tmp)
        assert any(f"BLOCKED {targets[1]} {e}" in r.stdout_tail for e in (30, 13, 2)), r.stdout_tail
    finally:
        for t in targets:
            t.unlink(missing_ok=True)


@needs_bwrap
def test_secrets_are_hidden(ws: Path, host_dir: Path, monkeypatch: pytest.MonkeyPatch):
    home = host_dir / "home"
    home.mkdir(mode=0o755)
    (home / "credentials").write_text("TOPSECRET-HOME")
    (home / "credentials").chmod(0o644)
    vault = ws / "vault"  # a hidden dir inside the workspace itself
    vault.mkdir()
    (vault / "key").write_text("TOPSECRET-VAULT")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-TOPSECRET-ENV")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-TOPSECRET-ENV")
    cmd = script(ws, f"""
        import os
        for p in [{str(home / "credentials")!r}, {str(vault / "key")!r},
                  {str(REPO_ROOT / "dagster_home" / "dagster.yaml")!r}, "/root/.bashrc"]:
            try:
                print("READ", p, open(p).read()[:40].replace(chr(10), " "))
            except OSError as e:
                print("BLOCKED", p, e.errno)
        print("ENV", sorted(os.environ))
        print("VALUES", "TOPSECRET" in repr(dict(os.environ)))
        print("ROOT", sorted(os.listdir("/root")))
    """)
    extra = {"MY_API_KEY": "TOPSECRET-1", "DB_PASSWORD": "TOPSECRET-2", "Auth_Header": "TOPSECRET-3",
             "AWS_SECRET_ACCESS_KEY": "TOPSECRET-4", "FOO": "bar"}

    # control: without hiding, the planted home file is readable (the test is meaningful)
    r0 = run_sandboxed(cmd, ws, timeout_s=30, hide=[], ro_paths=[host_dir])
    assert f"READ {home / 'credentials'} TOPSECRET-HOME" in r0.stdout_tail, r0.stderr_tail

    assert Path.home() == home and home in default_hidden_paths()
    r = run_sandboxed(cmd, ws, timeout_s=30, env=extra, ro_paths=[host_dir],
                      hide=[*default_hidden_paths(), vault])
    assert r.exit_code == 0, r.stderr_tail
    out = r.stdout_tail
    assert "TOPSECRET" not in out, out
    assert out.count("BLOCKED") == 4
    assert "'FOO'" in out and "OPENAI_API_KEY" not in out and "GITHUB_TOKEN" not in out
    assert "VALUES False" in out
    assert "ROOT []" in out or "ROOT ['.pyenv']" in out  # only the interpreter is bound back
    assert (vault / "key").read_text() == "TOPSECRET-VAULT"  # untouched on the host


def test_env_scrubbing_unit(tmp_path: Path):
    env = build_env(tmp_path, sys.executable, {"HF_TOKEN": "x", "my_key": "x", "PASSWD": "x",
                                               "SOME_CREDENTIALS": "x", "OK": "1"})
    assert env["OK"] == "1" and env["HOME"] == str(tmp_path)
    assert not {"HF_TOKEN", "my_key", "PASSWD", "SOME_CREDENTIALS"} & set(env)
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).absolute().parent)
    assert env["HF_HUB_OFFLINE"] == "1" and env["OMP_NUM_THREADS"] == "2"
    assert REPO_ROOT / "dagster_home" in default_hidden_paths()


# --------------------------------------------------------------------------- resource abuse

@needs_bwrap
def test_fork_storm_is_capped(ws: Path):
    cmd = script(ws, """
        import os, time
        n = 0
        try:
            while n < 1000:
                if os.fork() == 0:
                    time.sleep(2)
                    os._exit(0)
                n += 1
        except OSError as e:
            print("FORK FAILED after", n, e.errno)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, max_procs=32)
    assert r.exit_code == 0, r.stderr_tail
    assert "FORK FAILED after" in r.stdout_tail
    assert int(r.stdout_tail.split("after")[1].split()[0]) < 32


@needs_bwrap
def test_fork_bomb_is_contained_and_cleaned_up(ws: Path):
    token = f"bomb_{uuid.uuid4().hex}.py"
    cmd = script(ws, """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """, name=token)
    r = run_sandboxed(cmd, ws, timeout_s=3, max_procs=48)
    assert r.timed_out and r.killed_reason == "timeout" and r.exit_code is None
    assert r.duration_s < 10
    assert procs_with(token) == []  # nothing of it survives
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


@needs_bwrap
def test_memory_bomb_is_killed(ws: Path):
    cmd = script(ws, """
        chunks = []
        while True:
            chunks.append(b"x" * (32 << 20))
    """)
    t0 = time.monotonic()
    r = run_sandboxed(cmd, ws, timeout_s=30, memory_mb=512)
    assert time.monotonic() - t0 < 15
    assert not r.ok and not r.timed_out
    assert r.killed_reason == "memory" or "MemoryError" in r.stderr_tail, r


@needs_bwrap
def test_memory_of_the_whole_tree_is_limited(ws: Path):
    # each child stays under the per-process RLIMIT_AS; together they exceed memory_mb
    cmd = script(ws, """
        import os, time
        for _ in range(6):
            if os.fork() == 0:
                blob = b"x" * (200 << 20)
                time.sleep(60)
                os._exit(0)
        time.sleep(60)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, memory_mb=512)
    assert r.killed_reason == "memory" and r.exit_code is None, r
    assert r.duration_s < 15
    assert r.peak_memory_mb > 512


@needs_bwrap
def test_private_tmp_counts_as_memory(ws: Path):
    # files in the sandbox's tmpfs /tmp are RAM too: 300 MB there + 300 MB allocated > 512
    cmd = script(ws, """
        import time
        with open("/tmp/fill", "wb") as f:
            for _ in range(300):
                f.write(b"z" * (1 << 20))
        blob = b"x" * (300 << 20)
        time.sleep(60)
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, memory_mb=512)
    assert r.killed_reason == "memory" and r.duration_s < 15, r


@needs_bwrap
def test_infinite_loop_is_killed_by_timeout(ws: Path):
    cmd = script(ws, """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    """)
    r = run_sandboxed(cmd, ws, timeout_s=2)
    assert r.timed_out and r.killed_reason == "timeout" and r.exit_code is None
    assert 2 <= r.duration_s < 10


@needs_bwrap
def test_huge_output_goes_to_a_capped_file_with_a_bounded_tail(ws: Path):
    cmd = script(ws, """
        import sys
        line = "y" * 1023 + "\\n"
        block = line * 1024
        for _ in range(200):  # 200 MB
            sys.stdout.write(block)
        print("END")
    """)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = run_sandboxed(cmd, ws, timeout_s=60, max_file_mb=64)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert r.killed_reason == "file_size", r  # SIGXFSZ at the cap
    assert len(r.stdout_tail) <= 4100 and r.stdout_tail.endswith("y" * 100 + "\n")
    assert os.path.getsize(r.stdout_path) <= 64 << 20
    assert (rss_after - rss_before) < 100 * 1024  # KiB: the output never went through us


@needs_bwrap
def test_orphaned_daemon_dies_with_the_run(ws: Path):
    token = f"daemon_{uuid.uuid4().hex}.py"
    cmd = script(ws, """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3)
                open("orphan_alive.txt", "w").write("still here")
                os._exit(0)
            os._exit(0)
        print("parent exits")
    """, name=token)
    r = run_sandboxed(cmd, ws, timeout_s=30)
    assert r.exit_code == 0 and "parent exits" in r.stdout_tail
    assert r.duration_s < 3
    time.sleep(5)
    assert not (ws / "orphan_alive.txt").exists()
    assert procs_with(token) == []


# --------------------------------------------------------------------------- config paths

def test_sandbox_requested_but_unavailable_raises(ws: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sandbox_run, "sandbox_available", lambda: (False, "bwrap not found"))
    cmd = script(ws, "print('never')")
    with pytest.raises(RuntimeError, match=r"(?s)apt-get install bubblewrap.*sandbox: false"):
        run_sandboxed(cmd, ws, timeout_s=10)
    with pytest.raises(RuntimeError):
        Runner().run(cmd, ws, timeout_s=10)


def test_unsandboxed_is_an_explicit_opt_in(ws: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-TOPSECRET")
    cmd = script(ws, """
        import os, json
        print("KEY" in "".join(os.environ), os.environ["HOME"] == os.getcwd())
        open("out.txt", "w").write("x")
    """)
    monkeypatch.setenv("RESEARCHLOOP_UNSANDBOXED", "1")  # the environment decides, at use time
    r = Runner().run(cmd, ws, timeout_s=30)
    assert r.exit_code == 0 and not r.sandboxed, r.stderr_tail
    assert "False True" in r.stdout_tail and (ws / "out.txt").exists()
    loop = script(ws, "while True: pass", name="loop.py")
    r = Runner().run(loop, ws, timeout_s=1)
    assert r.timed_out and r.duration_s < 5


@needs_bwrap
def test_runner_resource_defaults(ws: Path):
    res = Runner()
    assert res.sandboxed() is True and res.memory_mb == 4096 and res.max_procs == 256
    r = res.run(script(ws, "import sys; sys.exit(3)"), str(ws), timeout_s=30)
    assert r.exit_code == 3 and r.killed_reason is None and r.sandboxed


def test_prepare_workspace_is_fresh_each_time(tmp_path: Path):
    tpl = tmp_path / "template"
    (tpl / "__pycache__").mkdir(parents=True)
    (tpl / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    (tpl / "runs" / "old").mkdir(parents=True)
    (tpl / "final_info.json").write_text("{}")
    (tpl / "experiment.py").write_text("print(1)")
    (tpl / "pkg").mkdir()
    (tpl / "pkg" / "mod.py").write_text("")
    (tpl / "pkg" / "mod.pyc").write_bytes(b"")
    dest = prepare_workspace(tpl, tmp_path / "attempts" / "a1")
    (dest / "leftover.txt").write_text("from the previous attempt")
    dest = prepare_workspace(tpl, tmp_path / "attempts" / "a1")
    names = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert names == ["experiment.py", "pkg", "pkg/mod.py"]
    assert (tpl / "final_info.json").exists()  # template untouched


def test_read_tail_reads_only_the_end(tmp_path: Path):
    p = tmp_path / "big.log"
    with open(p, "w") as f:
        f.write("a" * 10_000_000 + "é" * 10 + "\nLAST LINE\n")
    tail = read_tail(p)
    assert len(tail) <= 4000 and tail.endswith("é" * 10 + "\nLAST LINE\n")
    assert read_tail(tmp_path / "missing.log") == ""


def test_interpreter_under_tmp_is_visible_in_the_sandbox(tmp_path):
    """A checkout (and its venv) under /tmp, as in a CI clone, still runs sandboxed."""
    import subprocess as sp
    import sys as _sys

    from resources.sandbox import run_sandboxed

    ok, why = sandbox_available()
    if not ok:
        pytest.skip(why)
    venv = tmp_path / "venv"
    sp.run([_sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "s.py").write_text("import sys; print(sys.prefix)\n")
    r = run_sandboxed(["python", "s.py"], ws, timeout_s=30, python=str(venv / "bin" / "python"))
    assert r.exit_code == 0, r.stderr_tail
    assert str(venv) in r.stdout_tail
