"""Hostile scripts against the host's disk, run under the real sandbox: an fallocate past the
quota (faster than any poll), a folder tree thousands of levels deep, a sparse file in out/
that a plain copy would write out in full. Each asserts what is left on the host, that nothing
escapes the runner as an exception, and that the attempt is recorded as failed with the reason;
plus the bounded walk, copy, hash and delete those rely on (resources/workspace_walk/)."""
from __future__ import annotations

import os
import re
import stat
import textwrap
from pathlib import Path

import pytest

from resources.runner import Runner
from resources.sandbox import prepare_workspace, prune_attempts, run_sandboxed
from tests.support.sandbox_fixtures import needs_bwrap

MB = 1 << 20
DEPTH = 3000
DEEP = f"""
import os
for _ in range({DEPTH}):
    os.mkdir("d")
    os.chdir("d")
open("bottom.txt", "w").write("x")
print("DEEP DONE")
"""


def script(ws: Path, body: str, name: str = "s.py") -> list[str]:
    (ws / name).write_text(textwrap.dedent(body))
    return ["python", name]


def _entries(root: Path):
    """(lstat) of everything under root, at any depth: one open folder per level, no recursion
    (independent of the code under test)."""
    stack = [(os.open(root, os.O_RDONLY | os.O_DIRECTORY), None)]
    try:
        while stack:
            fd, names = stack[-1]
            if names is None:
                names = sorted(os.listdir(fd), reverse=True)
                stack[-1] = (fd, names)
            if not names:
                os.close(fd)
                stack.pop()
                continue
            name = names.pop()
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            yield st
            if stat.S_ISDIR(st.st_mode):
                stack.append((os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd), None))
    finally:
        for fd, _ in stack:
            os.close(fd)


def allocated(root: Path) -> int:
    """Bytes the tree takes on disk (hard links once)."""
    seen, total = set(), 0
    for st in _entries(root):
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def make_deep(root: Path, depth: int = DEPTH) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def template(tmp_path: Path, code: str, **files: str) -> Path:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "s.py").write_text(textwrap.dedent(code))
    for name, text in files.items():
        (tpl / name).write_text(textwrap.dedent(text))
    return tpl


# --------------------------------------------------------------------------- fallocate

FALLOCATE = """
import os
for i in range(8):  # 8 x 64 MB in a few milliseconds, against a 32 MB quota
    fd = os.open(f"big-{i}.bin", os.O_CREAT | os.O_WRONLY)
    os.posix_fallocate(fd, 0, 64 << 20)
    os.close(fd)
print("ALLOCATED ALL")
"""


@needs_bwrap
def test_fallocate_past_the_quota_fails_inside_the_sandbox(ws: Path):
    cmd = script(ws, FALLOCATE)
    r = run_sandboxed(cmd, ws, timeout_s=30, disk_mb=32)
    assert "ALLOCATED ALL" not in r.stdout_tail, r
    assert r.killed_reason == "disk" and not r.ok, r
    assert "No space left on device" in r.stderr_tail, r.stderr_tail
    assert allocated(ws) <= 32 * MB  # the filesystem refused it: no poll could have been in time


@needs_bwrap
def test_fallocate_attempt_is_recorded_as_a_disk_failure(tmp_path: Path):
    from assets.run_results.experimenting import RunTarget, run_once

    tpl = template(tmp_path, FALLOCATE)
    t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=30)
    work = tmp_path / "work"
    a = run_once(t, (tpl / "s.py").read_text(), Runner(disk_mb=32), work, 1)
    assert a.error and re.search(r"disk|No space left|quota", a.error), a.error
    assert allocated(work) <= 32 * MB + MB  # the workspace plus its two small logs


# --------------------------------------------------------------------------- a deep tree

@needs_bwrap
def test_deep_tree_is_refused_and_leaves_nothing_owned_by_the_sandbox(tmp_path: Path):
    ws = tmp_path / "attempt-1"
    ws.mkdir()
    (ws / "keep.txt").write_text("from the template")
    cmd = script(ws, DEEP)
    r = Runner().run(cmd, ws, timeout_s=60)  # no exception escapes the runner
    assert not r.ok and r.killed_reason == "disk", r
    assert "nested folders" in r.stderr_tail, r.stderr_tail
    me = os.geteuid()
    owners = {st.st_uid for st in _entries(ws)}
    assert owners <= {me}, owners  # nothing left owned by the sandbox's uid
    assert (ws / "keep.txt").read_text() == "from the template"
    prepare_workspace(ws, tmp_path / "copy")  # the host can copy it ...
    prune_attempts(tmp_path, keep=0)  # ... and delete it
    assert not ws.exists()


@needs_bwrap
def test_deep_tree_attempt_is_recorded_with_the_reason(tmp_path: Path):
    from assets.run_results.experimenting import RunTarget, run_once

    tpl = template(tmp_path, DEEP)
    t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=60)
    a = run_once(t, DEEP, Runner(), tmp_path / "work", 1)
    assert a.error and "nested folders" in a.error and "(disk)" in a.error, a.error


def test_deep_tree_unsandboxed_is_refused_then_deleted(tmp_path: Path):
    from resources.workspace_walk import remove_tree

    ws = tmp_path / "attempt-1"
    ws.mkdir()
    cmd = script(ws, DEEP)
    try:
        r = run_sandboxed(cmd, ws, timeout_s=60, sandbox=False)
        assert "DEEP DONE" in r.stdout_tail, r.stderr_tail
        assert not r.ok and r.killed_reason == "disk" and "nested folders" in r.stderr_tail, r
        tpl = tmp_path / "tpl"
        tpl.mkdir()
        (tpl / "x.py").write_text("")
        prepare_workspace(tpl, ws)  # replaces the deep tree
        assert sorted(os.listdir(ws)) == ["x.py"]
        make_deep(tmp_path / "attempt-1")
        (tmp_path / "attempt-2").mkdir()
        assert prune_attempts(tmp_path, keep=1) == [ws]
        assert not ws.exists()
    finally:
        remove_tree(ws)  # (pytest's own clean-up of old temporary folders recurses)


def test_remove_tree_deletes_any_depth(tmp_path: Path):
    from resources.workspace_walk import remove_tree

    root = tmp_path / "deep"
    root.mkdir()
    make_deep(root)
    (root / "d" / "d").chmod(0o500)  # a read-only folder inside: still deleted
    remove_tree(root)
    assert not root.exists() and os.listdir(tmp_path) == []


def test_walks_refuse_a_deep_tree_with_a_reason(tmp_path: Path):
    from resources.workspace_walk import WorkspaceLimitError, copy_tree, hash_files, remove_tree, scan

    root = tmp_path / "deep"
    root.mkdir()
    make_deep(root)
    (tmp_path / "dest").mkdir()
    try:
        for walk in (lambda: scan(root), lambda: hash_files(root), lambda: copy_tree(root, tmp_path / "dest")):
            with pytest.raises(WorkspaceLimitError, match="nested folders"):
                walk()
    finally:
        remove_tree(root)  # (pytest's own clean-up of old temporary folders recurses)
        remove_tree(tmp_path / "dest")


def test_walks_refuse_too_many_entries(tmp_path: Path):
    from resources.workspace_walk import Bounds, WorkspaceLimitError, scan

    for i in range(50):
        (tmp_path / str(i)).write_text("")
    with pytest.raises(WorkspaceLimitError, match="more than 20 files"):
        scan(tmp_path, Bounds(max_entries=20))
    assert scan(tmp_path, Bounds(max_entries=50)).entries == 50


# --------------------------------------------------------------------------- sparse files

SPARSE = """
import os
os.makedirs("out", exist_ok=True)
with open("out/pred.bin", "wb") as f:
    f.truncate(256 << 20)  # 256 MB long, nothing on disk: a plain copy writes 256 MB
print("SPARSE DONE")
"""
SCORE = """
import json, os
os.makedirs("out", exist_ok=True)
json.dump({"acc": 1.0}, open("out/final_info.json", "w"))
"""


@needs_bwrap
def test_sparse_output_is_not_copied_in_full(tmp_path: Path):
    from assets.run_results.experimenting import RunTarget, run_once

    tpl = template(tmp_path, SPARSE, **{"score.py": SCORE})
    t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=30, metric="acc",
                  score=("python", "score.py"))
    work = tmp_path / "work"
    a = run_once(t, (tpl / "s.py").read_text(), Runner(disk_mb=64), work, 1)
    assert a.error and "sparse" in a.error and "quota" in a.error, a.error
    assert allocated(work) <= 64 * MB
    assert max(st.st_size for st in _entries(work)) < 64 * MB  # no 256 MB file anywhere, sparse or not


def test_copy_tree_keeps_holes_and_counts_sparse_files_by_length(tmp_path: Path):
    from resources.workspace_walk import Bounds, WorkspaceLimitError, copy_tree, hash_files

    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    with open(src / "holey.bin", "wb") as f:
        f.write(b"x" * MB)
        f.truncate(16 * MB)
    t = copy_tree(src, dest, Bounds(max_bytes=32 * MB))
    assert t.bytes == 16 * MB  # counted by its length
    assert (dest / "holey.bin").stat().st_size == 16 * MB
    assert (dest / "holey.bin").stat().st_blocks * 512 < 4 * MB  # the hole stayed a hole
    assert hash_files(dest) == hash_files(src)
    (tmp_path / "dest2").mkdir()
    with pytest.raises(WorkspaceLimitError, match=r"quota of 8 MB.*sparse file of 16 MB"):
        copy_tree(src, tmp_path / "dest2", Bounds(max_bytes=8 * MB))


# --------------------------------------------------------------------------- what the host gets back

@needs_bwrap
def test_the_run_leaves_the_workspace_as_it_would_on_the_host(ws: Path):
    """The workspace lives on a size-limited filesystem during the run; afterwards the host
    folder holds exactly what the run left: changes, deletions, new files, links, FIFOs, modes
    (without set-uid), times; a hidden folder inside it is untouched."""
    (ws / "keep.txt").write_text("same")
    (ws / "change.txt").write_text("before")
    (ws / "sly.txt").write_text("aaaa")
    (ws / "was_file").write_text("x")
    (ws / "gone.txt").write_text("delete me")
    vault = ws / "vault"
    vault.mkdir()
    (vault / "key").write_text("SECRET")
    cmd = script(ws, """
        import os
        open("change.txt", "w").write("after")
        st = os.stat("sly.txt")  # same size, same time: only the bytes tell
        open("sly.txt", "w").write("bbbb")
        os.utime("sly.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
        os.remove("was_file")
        os.makedirs("was_file/now_dir")
        os.remove("gone.txt")
        os.makedirs("out/sub", exist_ok=True)
        open("out/sub/r.txt", "w").write("result")
        os.symlink("/etc/passwd", "out/link")
        os.mkfifo("out/fifo")
        open("out/suid", "w").write("x")
        os.chmod("out/suid", 0o4755)
        os.utime("out/sub/r.txt", (1_000_000_000, 1_000_000_000))
        open("out/locked.txt", "w").write("mine")
        os.chmod("out/locked.txt", 0)  # unreadable, even to its owner (not root)
        os.makedirs("out/locked_dir/inner")
        os.chmod("out/locked_dir", 0)
        print("VAULT", os.listdir("vault"))
    """)
    r = run_sandboxed(cmd, ws, timeout_s=30, hide=[vault])
    assert r.ok, r.stderr_tail
    assert "VAULT []" in r.stdout_tail
    assert (ws / "keep.txt").read_text() == "same" and (ws / "change.txt").read_text() == "after"
    assert not (ws / "gone.txt").exists()
    assert (ws / "sly.txt").read_text() == "bbbb"
    assert (ws / "was_file" / "now_dir").is_dir()
    assert (ws / "out/sub/r.txt").read_text() == "result"
    assert (ws / "out/sub/r.txt").stat().st_mtime == 1_000_000_000
    assert os.readlink(ws / "out/link") == "/etc/passwd"
    assert stat.S_ISFIFO((ws / "out/fifo").lstat().st_mode)
    assert stat.S_IMODE((ws / "out/suid").stat().st_mode) == 0o755
    assert stat.S_IMODE((ws / "out/locked.txt").lstat().st_mode) == 0
    assert stat.S_IMODE((ws / "out/locked_dir").lstat().st_mode) == 0
    (ws / "out/locked_dir").chmod(0o700)
    assert (ws / "out/locked_dir/inner").is_dir()
    assert (vault / "key").read_text() == "SECRET"
    assert {st.st_uid for st in _entries(ws)} <= {os.geteuid()}


def test_scorer_gets_no_deep_or_sparse_output_unsandboxed(tmp_path: Path):
    """The host's copy of OUT_DIR to the scorer is bounded too when nothing else is (no sandbox):
    a deep tree or a sparse file past the quota is the attempt's failure with the reason."""
    from assets.run_results.experimenting import OUT_DIR, RunTarget, run_scorer
    from resources.workspace_walk import remove_tree

    tpl = template(tmp_path, "", **{"score.py": SCORE})
    t = RunTarget(folder=tpl, code_file="s.py", command=("python", "s.py"), timeout_s=30, metric="acc",
                  score=("python", "score.py"))
    ws = tmp_path / "attempt-1"
    (ws / OUT_DIR).mkdir(parents=True)
    make_deep(ws / OUT_DIR)
    try:
        metrics, error = run_scorer(t, ws, Runner(sandbox=False))
        assert metrics == {} and error and "nested folders" in error, error
        remove_tree(ws / OUT_DIR)
        (ws / OUT_DIR).mkdir()
        with open(ws / OUT_DIR / "pred.bin", "wb") as f:
            f.truncate(64 << 30)  # 64 GB long, nothing on disk
        metrics, error = run_scorer(t, ws, Runner(sandbox=False))
        assert metrics == {} and error and "quota" in error, error
        assert allocated(tmp_path) < 64 * MB
    finally:
        remove_tree(tmp_path / "attempt-1-score")
        remove_tree(ws)


def test_debug_refuses_a_deep_script_folder_with_a_reason(tmp_path: Path):
    """`researchloop debug` sizes the script's folder before copying it for each attempt: a deep
    tree there is refused with the reason, not a RecursionError."""
    from pipelines.cli.debug import _folder_too_big
    from resources.workspace_walk import remove_tree

    (tmp_path / "s.py").write_text("print(1)\n")
    assert _folder_too_big(tmp_path) is None
    (tmp_path / "data").mkdir()
    make_deep(tmp_path / "data")
    try:
        why = _folder_too_big(tmp_path)
        assert why and "nested folders" in why, why
    finally:
        remove_tree(tmp_path / "data")
