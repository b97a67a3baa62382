"""Sandboxed subprocess runner for code written by an LLM (untrusted).

What one run gets (``run_sandboxed``, or the ``Runner`` Dagster resource):

* **bubblewrap** (Debian ``bubblewrap``): a root of its own (an empty tmpfs, read-only once set
  up) holding only what a Python experiment needs, read-only: ``/usr`` (with Debian's data sets
  under /usr/share/datasets), ``/sys``, the merged-/usr links (/bin, /lib, ...), a few files of
  ``/etc`` (loader cache, passwd/group, time zone, certificates, fonts), the interpreter's dirs
  (venv and base install) and any ``ro_paths`` / ``$RESEARCHLOOP_SANDBOX_RO`` dirs; at the
  workspace's path a size-limited tmpfs of its own holding a copy of the workspace (no host path
  is writable: see **Disk**); a fresh ``/dev``, ``/proc`` of its own
  PID namespace, private size-capped tmpfs on ``/tmp``, ``/dev/shm`` and ``/run`` (``/var/run``
  links to it). No other host path exists inside, so no host UNIX socket file (session bus,
  container runtime, agents under /run, /var, $HOME) can be reached; abstract sockets are per
  network namespace, and the sandbox has its own (only a loopback with nothing on it). Hidden
  dirs (``$HOME``, ``/root``, ``$DAGSTER_HOME``, the repo's ``dagster_home``, any ``hide=[...]``)
  that fall inside what is shown become empty tmpfs; ``--die-with-parent``, ``--new-session``;
  ``--clearenv`` and a minimal environment with anything secret-looking dropped.
* **seccomp** (installed by the shim below, after no_new_privs): no new user namespace
  (unshare/clone with CLONE_NEWUSER get EPERM; clone3 gets ENOSYS so libc falls back to clone),
  no setns, bpf, userfaultfd, perf_event_open, keyrings, io_uring, module loading, kexec,
  open_by_handle_at, and no SysV shared memory or message queues (RAM no process owns).
* **A different uid.** As root, RLIMIT_NPROC is not enforced (the kernel exempts uid 0, also
  through a user namespace that maps to it: measured), so when the runner runs as root the
  command runs as a fresh *ephemeral* uid/gid (random, > 1.5e9, no passwd entry, no groups,
  no capabilities, no_new_privs) that owns nothing on the host: only the copy of the workspace
  in the sandbox's own filesystem is given to it; what comes back belongs to the workspace's
  owner. As a normal user, bwrap's user namespace is used and the uid is the caller's.
* **rlimits**, set by a tiny trusted shim (``python -I -S -c ...``) *inside* the sandbox just
  before it execs the command, not by a ``preexec_fn`` on bwrap: (1) ``preexec_fn`` is unsafe in
  threaded programs (Dagster), (2) an RLIMIT_NPROC set before bwrap creates its user namespace
  is also charged against every process of the calling user on the host (measured: bwrap then
  fails with "Creating new namespace failed"), while set inside it counts only the sandbox.
  RLIMIT_NPROC = max_procs (processes *and threads*), RLIMIT_FSIZE = max_file_mb (a bigger
  write gets SIGXFSZ, or EFBIG in Python, which ignores SIGXFSZ: ``killed_reason="file_size"``
  when a log hit the cap; this also caps the stdout/stderr log files), RLIMIT_CORE = 0,
  RLIMIT_AS = 2 x memory_mb (per-process backstop, see below).
* **Memory**: RLIMIT_AS alone is the wrong tool: it is per process (a fork multiplies it) and
  counts address space, not memory (a CUDA context reserves far more than RAM; CPU torch is
  fine: measured ~0.8 GB of address space for 0.37 GB RSS). So the limit that defines
  ``memory_mb`` is a watchdog in the calling thread that every 0.1 s sums, over the whole
  process tree (psutil), resident anonymous + resident shared memory (``RssAnon + RssShmem``:
  MAP_SHARED mappings, mapped memfds and tmpfs files count; shared libraries do not), the
  memfds the tree holds (written, never mapped: in nobody's RSS and under no RLIMIT_AS), plus
  what the sandbox keeps in its private tmpfs ``/tmp`` and ``/dev/shm`` (RAM owned by no
  process; each is also capped at memory_mb). That sum counts a page shared by n processes n
  times, so above ``memory_mb`` it is recounted with the page-table walk of smaps_rollup (Pss:
  each shared page once; ~25 ms per torch process, hence not every poll) before the tree is
  SIGKILLed (``killed_reason="memory"``). Measured overshoot: ~10 % at 512 MB. No cgroups
  needed (often read-only or v1 in containers). RLIMIT_AS at 2x is the hard per-process
  backstop against allocation spikes faster than the poll (the script then sees MemoryError);
  set ``limit_address_space=False`` for CUDA.
* **Disk**, bounded by construction: no poll can stop an allocation (fallocate takes gigabytes
  at once), so the workspace the command sees is a tmpfs of its own (bwrap ``--size``) of
  ``disk_mb``, where a write or an fallocate past the quota fails inside the sandbox (ENOSPC).
  The host fills it from the host folder while the shim waits (as root, owned by the ephemeral
  uid), holds it open through ``/proc/PID/root`` (an open folder keeps the filesystem alive
  after the sandbox's mount namespace is gone), and once every process of the sandbox is gone
  makes the host folder what the run left: new, changed and deleted files, links, FIFOs, modes
  without set-uid/set-gid bits, times (an unchanged file is compared byte for byte and kept;
  sockets and devices are left out). That copy back is bounded like every host walk of a
  workspace (``resources/workspace_walk.py``: no recursion; depth, path length, entries =
  ``disk_files``, bytes = ``disk_mb`` counted as a copy would write them, so a sparse file counts
  by its length and can never be inflated past the quota by a later copy) and checked before
  the host folder is touched: past a bound the host folder keeps what it held before the run.
  Either way, and for a run that failed with ENOSPC, the result has ``killed_reason="disk"``,
  the reason being the last line of stderr. Second line: every POLL_S the filesystem's used
  bytes and entries (statfs) are checked against the quota (SIGKILL, ``disk``). A tmpfs because
  it works as a normal user (inside bwrap's user namespace) and as root alike, with no mount
  rights, loop device or quota-enabled filesystem on the host; its price is RAM (what the run
  writes to its workspace, up to ``disk_mb``, besides ``memory_mb``, freed once it is copied
  back) and the copy in and back (proportional to the workspace; topic folders are small).
  Unsandboxed only the poll is left (every DISK_POLL_S the host folder's allocated bytes and
  entries; a fast writer overshoots) plus the same bounded check after the run.
  ``prune_attempts`` keeps the newest KEEP_ATTEMPTS attempt folders of an idea.
* **Wall clock**: at ``timeout_s`` the tree is SIGKILLed (process group, every descendant, the
  namespace's init -> the kernel kills everything in the PID namespace; as root also every
  process of the ephemeral uid). Orphans/daemons die with the namespace when the command exits.
* **Output** goes straight to files (opened by the parent, handed over as fds) in a logs dir
  next to the workspace (default ``WORKDIR/../logs/``), never through pipes; the result carries
  only the last ~4000 characters, read from the end of the files.

What the host later reads from a workspace (final_info.json, sources, logs) goes through
``resources/safe_io.py`` (no symlinks, FIFOs or devices followed, size-capped).

``sandbox=False`` (``run_sandboxed``; for the ``Runner`` resource only
``RESEARCHLOOP_UNSANDBOXED=1`` in the environment, read at each run, never run config) is an
explicit opt-in to a plain subprocess: same env scrubbing, rlimits,
timeout and memory watchdog, but no filesystem/network isolation, and a daemon that double
forks and calls setsid escapes, and RLIMIT_NPROC is not set (outside a namespace it would
count every process of the calling user; for root it is not enforced at all).
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import psutil
import pydantic

from resources.safe_io import read_tail, safe_read  # noqa: F401  (the one tail reader; re-exported)
from resources.settings import settings
from resources.timing_log import EXPERIMENT as SPAN_EXPERIMENT
from resources.timing_log import log_span
from resources.workspace_walk import Bounds, WorkspaceLimitError, copy_tree, remove_tree, scan

if TYPE_CHECKING:
    from schemas.topic import ExecutionSpec

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
TAIL_CHARS = 4000
POLL_S = 0.1
_EPHEMERAL_UID_BASE = 1_500_000_000
_EPHEMERAL_UID_SPAN = 500_000_000
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_HIDDEN_TMPFS_BYTES = 1 << 20
_counter = itertools.count()
DEFAULT_DISK_MB = 4096
DEFAULT_DISK_FILES = 100_000
DISK_POLL_S = 0.5
KEEP_ATTEMPTS = 3  # attempt folders kept per idea (older ones are pruned, see prune_attempts)
_READY_S = 60.0  # bubblewrap's set-up, before the host fills the workspace
# how a process reports a full filesystem (ENOSPC, EDQUOT) on stderr: Python's OSError and libc's strerror
_OUT_OF_SPACE = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")
UNSANDBOXED_ENV = "RESEARCHLOOP_UNSANDBOXED"

INSTALL_HINT = (
    "bubblewrap (bwrap) is needed to run generated code in a sandbox: install it "
    "(`apt-get install bubblewrap`, or `make setup`), or set RESEARCHLOOP_UNSANDBOXED=1 in the "
    "environment to run generated code as a plain, unisolated subprocess (sandbox: false)."
)

# Runs inside the sandbox (trusted code, the runner's own interpreter, -I -S: no site, no
# env influence): waits until the host has filled the workspace, then rlimits, then (as root)
# drop to the ephemeral uid, no_new_privs, exec.
# argv: uid gid nproc as_bytes fsize_bytes ready_fd go_fd -- command...   (-1 = leave unchanged / none)
_SHIM = r"""
import os, sys, resource
a = sys.argv
uid, gid, nproc, as_b, fsize_b, ready, go = (int(x) for x in a[1:8])
cmd = a[9:]
if ready >= 0:  # the sandbox is set up: the host fills its workspace filesystem, then says go
    os.write(ready, b"r")
    os.close(ready)
    got = os.read(go, 1)
    os.close(go)
    if got != b"g":
        sys.exit("runner shim: the workspace was not set up")
def lim(res, v):
    if v < 0:
        return
    soft, hard = resource.getrlimit(res)
    if hard != resource.RLIM_INFINITY and v > hard:
        v = hard
    resource.setrlimit(res, (v, v))
lim(resource.RLIMIT_CORE, 0)
lim(resource.RLIMIT_FSIZE, fsize_b)
lim(resource.RLIMIT_AS, as_b)
lim(resource.RLIMIT_NPROC, nproc)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if uid >= 0:
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        sys.exit("runner shim: could not drop privileges")
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    sys.exit("runner shim: could not set no_new_privs")
# seccomp: no new user namespace (unshare/clone with CLONE_NEWUSER; clone3, whose flags a filter
# cannot read, answers ENOSYS so libc falls back to clone), and none of the syscalls behind
# most container escapes (setns, bpf, userfaultfd, perf_event_open, keyrings, io_uring, modules,
# kexec, open_by_handle_at), nor SysV shared memory or message queues (a detached segment or a
# queue holds RAM no process owns, out of the memory watchdog's sight; ML code uses shm_open,
# memfd or files instead). Other architectures are killed; unknown machines get no filter.
NRS = {"x86_64": (0xC000003E, 272, 56, dict(setns=308, bpf=321, userfaultfd=323, perf_event_open=298,
       keyctl=250, add_key=248, request_key=249, io_uring_setup=425, init_module=175, finit_module=313,
       kexec_load=246, kexec_file_load=320, open_by_handle_at=304, shmget=29, msgget=68)),
       "aarch64": (0xC00000B7, 97, 220, dict(setns=268, bpf=280, userfaultfd=282, perf_event_open=241,
       keyctl=219, add_key=217, request_key=218, io_uring_setup=425, init_module=105, finit_module=273,
       kexec_load=104, kexec_file_load=294, open_by_handle_at=265, shmget=194, msgget=186))}.get(os.uname().machine)
if NRS:
    arch, unshare, clone, blocked = NRS
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL, EPERM, ENOSYS = 0x7FFF0000, 0x80000000, 0x50000 | 1, 0x50000 | 38
    prog = [(LD, 0, 0, 4), (JEQ, 1, 0, arch), (RET, 0, 0, KILL), (LD, 0, 0, 0),
            (JGE, 0, 1, 0x40000000), (RET, 0, 0, KILL),  # the x32 ABI
            (JEQ, 0, 1, 435), (RET, 0, 0, ENOSYS)]
    for nr in blocked.values():
        prog += [(JEQ, 0, 1, nr), (RET, 0, 0, EPERM)]
    for nr in (unshare, clone):
        prog += [(JEQ, 0, 4, nr), (LD, 0, 0, 16), (JSET, 0, 1, 0x10000000), (RET, 0, 0, EPERM), (RET, 0, 0, ALLOW)]
    prog.append((RET, 0, 0, ALLOW))
    class F(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]
    class P(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F))]
    arr = (F * len(prog))(*[F(*i) for i in prog])
    fprog = P(len(prog), arr)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        sys.exit("runner shim: could not install the seccomp filter")
try:
    os.execvp(cmd[0], cmd)
except FileNotFoundError:
    sys.stderr.write("runner: command not found: %s\n" % cmd[0])
    sys.exit(127)
except PermissionError as e:
    sys.stderr.write("runner: cannot execute %s: %s\n" % (cmd[0], e))
    sys.exit(126)
"""


class ProcessResult(pydantic.BaseModel):
    command: list[str]
    workdir: str
    exit_code: int | None  # None when the runner killed it (see killed_reason)
    timed_out: bool
    killed_reason: str | None  # "timeout" | "memory" | "disk" | "file_size" (SIGXFSZ) | None
    duration_s: float
    stdout_path: str
    stderr_path: str
    stdout_tail: str  # last ~4000 chars, read from the end of the file
    stderr_tail: str
    sandboxed: bool
    peak_memory_mb: float = 0.0  # highest anonymous RSS of the tree the watchdog saw

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed_reason is None


# --------------------------------------------------------------------------- availability

@functools.lru_cache(maxsize=1)
def _bwrap_can_disable_userns() -> bool:
    """bubblewrap >= 0.8 has --disable-userns (no user namespace inside the sandbox's own)."""
    try:
        r = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--disable-userns" in r.stdout + r.stderr


def _ns_args(root_mode: bool) -> list[str]:
    if root_mode:
        # no user namespace: it would map the sandbox to uid 0 (where RLIMIT_NPROC is ignored)
        # and forbid dropping to the ephemeral uid (the seccomp filter refuses nested ones)
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try"]
    # as a normal user bwrap's own user namespace is used; nested ones are refused by bwrap too
    return ["--unshare-all", "--unshare-user", *(["--disable-userns"] if _bwrap_can_disable_userns() else [])]


@functools.lru_cache(maxsize=1)
def sandbox_available() -> tuple[bool, str]:
    """Whether bubblewrap works here (runs one trivial sandbox once; cached)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False, "bwrap not found on PATH. " + INSTALL_HINT
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", *_ns_args(os.geteuid() == 0),
            "--die-with-parent", "--new-session", "true"]
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bwrap failed to start: {e}. " + INSTALL_HINT
    if r.returncode != 0:
        return False, (f"bwrap cannot create a sandbox here (exit {r.returncode}: "
                       f"{r.stderr.strip()[-500:]}); user/mount/pid/net namespaces may be "
                       "disabled (e.g. an unprivileged container). " + INSTALL_HINT)
    return True, f"bubblewrap ok ({bwrap})"


# --------------------------------------------------------------------------- workspace

def workspace_bounds(disk_mb: int | None = DEFAULT_DISK_MB, disk_files: int = DEFAULT_DISK_FILES) -> Bounds:
    """What a walk, copy or hash of a workspace may take: its disk quota in bytes as a copy would
    write them (a sparse file by its length), its file count, and the walk's depth and path limits."""
    return Bounds(max_bytes=None if disk_mb is None else int(disk_mb) << 20, max_entries=int(disk_files))


def prepare_workspace(template_dir: Path, dest: Path,
                      ignore: Sequence[str] = ("__pycache__", "*.pyc", "runs", "final_info.json"),
                      bounds: Bounds | None = None) -> Path:
    """A fresh copy of the template for one attempt (dest is replaced if it exists, at any depth).
    Raises WorkspaceLimitError when the template is past `bounds` (default: the default quota)."""
    template_dir, dest = Path(template_dir).resolve(), Path(dest).absolute()
    if not template_dir.is_dir():
        raise FileNotFoundError(f"template dir not found: {template_dir}")
    if dest.resolve() == template_dir or template_dir in dest.resolve().parents:
        raise ValueError(f"workspace {dest} must not be inside the template {template_dir}")
    remove_tree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.mkdir()
    copy_tree(template_dir, dest, bounds or workspace_bounds(), ignore=ignore)
    dest.chmod(stat.S_IMODE(template_dir.stat().st_mode))
    return dest


def prune_attempts(workdir: Path, keep: int = KEEP_ATTEMPTS) -> list[Path]:
    """Remove all but the newest `keep` attempt-N folders of workdir (and their logs): a long
    repair loop, or many resumed rounds, otherwise keep every copy and every output forever."""
    workdir = Path(workdir)
    numbered = []
    for p in workdir.glob("attempt-*"):
        tail = p.name[len("attempt-"):]
        if tail.isdigit() and p.is_dir() and not p.is_symlink():
            numbered.append((int(tail), p))
    numbered.sort()
    removed = []
    for n, p in numbered[:max(0, len(numbered) - keep)]:
        try:
            remove_tree(p)
        except (OSError, WorkspaceLimitError) as e:  # a later prune tries again
            log.warning("runner: could not remove %s: %s", p, e)
        for log_file in (workdir / "logs").glob(f"attempt-{n}-*"):
            log_file.unlink(missing_ok=True)
        removed.append(p)
    return removed


# --------------------------------------------------------------------------- environment

def _is_secret(name: str) -> bool:
    up = name.upper()
    return any(m in up for m in _SECRET_MARKERS)


def build_env(workdir: Path, python: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The minimal environment of a sandboxed command (no secrets, whatever the caller passes)."""
    venv_bin = str(Path(python).absolute().parent)
    base = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "XDG_CACHE_HOME": "/tmp/.cache",
        "MPLCONFIGDIR": "/tmp/.matplotlib",
    }
    for k, v in (env or {}).items():
        if _is_secret(k):
            log.warning("runner: not passing %s to the sandboxed command (looks like a secret)", k)
            continue
        base[str(k)] = str(v)
    return {k: v for k, v in base.items() if not _is_secret(k)}


def default_hidden_paths() -> list[Path]:
    """Dirs replaced by an empty tmpfs in the sandbox: $HOME, /root, DAGSTER_HOME(s)."""
    out = [Path.home(), Path("/root"), REPO_ROOT / "dagster_home"]
    if home := settings().dagster_home:
        out.append(Path(home))
    return out


def _interpreter_roots(python: str) -> list[Path]:
    """Dirs an interpreter needs (venv + its base install), to re-expose if hidden."""
    roots: list[Path] = []
    p = Path(python).absolute()
    roots.append(p.parent.parent)  # the venv (or install) prefix
    roots.append(p.resolve().parent.parent)  # the real install prefix
    cfg = p.parent.parent / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(errors="replace").splitlines():
            k, _, v = line.partition("=")
            if k.strip() == "home" and v.strip():
                roots.append(Path(v.strip()).resolve().parent)
    if p.resolve() == Path(sys.executable).resolve() or str(p) == sys.executable:
        roots += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                  Path(sys.base_exec_prefix)]
    return roots


# --------------------------------------------------------------------------- bwrap argv

def _under(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _resolved(paths: Iterable[Path | str]) -> list[Path]:
    """Each path resolved (links followed), the root itself and unresolvable paths left out."""
    out: list[Path] = []
    for raw in paths:
        try:
            p = Path(raw).resolve()
        except (OSError, RuntimeError):
            continue
        if p != Path("/"):
            out.append(p)
    return out


def _normalise_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """The existing dirs among paths, resolved, each once, in order."""
    return list(dict.fromkeys(p for p in _resolved(paths) if p.is_dir()))


def _mkdirs(path: Path, tmpfs_roots: Sequence[Path]) -> list[str]:
    """--dir 0755 for every ancestor of path that lives in a sandbox tmpfs (so a non-root
    sandbox uid can traverse to path by its absolute name)."""
    args: list[str] = []
    for anc in reversed(path.parents):
        if any(anc != r and _under(anc, r) for r in tmpfs_roots):
            args += ["--perms", "0755", "--dir", str(anc)]
    return args


def _first_untraversable_ancestor(path: Path) -> Path | None:
    """The topmost strict ancestor of path that 'others' cannot search (mode without o+x)."""
    for anc in reversed(Path(path).parents):
        try:
            if not os.stat(anc).st_mode & 0o001:
                return anc
        except OSError:
            return None
    return None


def gpu_device_nodes(visible: str) -> list[str]:
    """NVIDIA device nodes a run given CUDA devices `visible` (e.g. "0") needs inside the
    fresh /dev: the control nodes and the cards named; nothing when no GPU is given."""
    ids = [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if not ids:
        return []
    names = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", *(f"nvidia{i}" for i in ids)]
    return [f"/dev/{n}" for n in names if os.path.exists(f"/dev/{n}")]


# top-level names of a merged-/usr system: a symlink into /usr is recreated, a real dir bound
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# what a Python (and torch/matplotlib) process reads from /etc; nothing else of /etc is shown
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group",
        "nsswitch.conf", "hosts", "host.conf", "gai.conf", "protocols", "services", "mime.types",
        "os-release", "ssl", "ca-certificates", "alternatives", "fonts", "matplotlibrc")
_RUN_TMPFS_BYTES = 1 << 20
SANDBOX_RO_ENV = "RESEARCHLOOP_SANDBOX_RO"  # extra read-only dirs (os.pathsep-separated), e.g. data


def system_ro_paths() -> list[Path]:
    """The host dirs every sandbox sees read-only: /usr (binaries, libraries, Debian's data sets
    such as /usr/share/datasets) and /sys (CPU/GPU topology for torch), plus the dirs named in
    $RESEARCHLOOP_SANDBOX_RO."""
    extra = [Path(p) for p in settings().sandbox_ro.split(os.pathsep) if p.strip()]
    return [Path("/usr"), Path("/sys"), *extra]


def _bind_set(paths: Iterable[Path | str]) -> list[Path]:
    """Existing dirs/files, resolved, outside the sandbox's own /tmp, /dev, /proc, without one
    nested in another (the outer bind brings it)."""
    out = sorted({p for p in _resolved(paths)
                  if p.exists() and not any(_under(p, Path(s)) for s in ("/tmp", "/dev", "/proc"))},
                 key=lambda p: len(p.parts))
    return [p for i, p in enumerate(out) if not any(_under(p, q) for q in out[:i])]


def bwrap_argv(workdir: Path, *, env: dict[str, str], hide: Sequence[Path], expose: Sequence[Path],
               tmp_bytes: int, root_mode: bool, bwrap: str = "bwrap",
               ro_paths: Sequence[Path | str] = (), ws_bytes: int | None = None,
               ws_mode: int = 0o755) -> list[str]:
    """The bwrap part of the command line (everything up to the sandboxed program).

    The sandbox's root is an empty tmpfs (made read-only at the end) holding only: /usr and /sys
    read-only, the merged-/usr links (/bin, /lib, ...), a few files of /etc, the interpreter's
    dirs (`expose`) and `ro_paths` read-only, a fresh /dev and /proc, and private tmpfs on /tmp,
    /dev/shm and /run (/var/run links to it). The workspace's path is a tmpfs of its own of
    `ws_bytes` (None: the kernel's default, half the RAM), mode `ws_mode`, which the host fills
    before the command starts and copies back after it (run_sandboxed): no host folder is
    writable. Nothing else of the host is there, so no host UNIX socket (the session bus, a
    container runtime's or an agent's socket under /run, /var, $HOME ...) can be reached: the
    network namespace covers only abstract sockets, not socket files. `hide` dirs inside what is
    shown become empty tmpfs."""
    workdir = Path(workdir)
    binds = _bind_set([*system_ro_paths(), *expose, *ro_paths])
    hide = _normalise_dirs(hide)
    # only dirs the sandbox would see need hiding: under a bind or the workspace (not /tmp, /dev)
    hide = [h for h in hide if _under(h, workdir) or (any(_under(h, b) for b in binds)
                                                      and not (_under(h, Path("/tmp")) or _under(h, Path("/dev"))))]
    # drop dirs nested in another hidden dir (its tmpfs already hides them), unless the
    # workspace bind sits between the two and brings them back
    hide = [p for p in hide if not any(
        q != p and _under(p, q) and not (_under(p, workdir) and _under(workdir, q))
        for q in hide)]
    tmpfs_roots = [Path("/tmp"), Path("/dev/shm"), *hide]
    made: set[Path] = set()

    def parents(path: Path) -> list[str]:
        """--dir 0755 for the ancestors of path on the sandbox's root tmpfs (bwrap would make
        them 0700, which the ephemeral uid cannot traverse)."""
        out: list[str] = []
        for anc in reversed(Path(path).parents):
            if anc == Path("/") or anc in made or any(_under(anc, r) for r in [*binds, *tmpfs_roots]):
                continue
            made.add(anc)
            out += ["--perms", "0755", "--dir", str(anc)]
        return out

    args = [bwrap]
    for b in binds:
        args += parents(b) + ["--ro-bind", str(b), str(b)]
    args += parents(Path("/etc/x")) + parents(Path("/var/x"))
    for top in _TOP_LEVEL:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top) and Path(top) not in binds:
            args += ["--ro-bind", top, top]
    for name in _ETC:
        p = Path("/etc") / name
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.exists():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--dev", "/dev", "--proc", "/proc",
             "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/dev/shm",
             "--perms", "0755", "--size", str(_RUN_TMPFS_BYTES), "--tmpfs", "/run",
             "--symlink", "../run", "/var/run"]
    for node in gpu_device_nodes(env.get("CUDA_VISIBLE_DEVICES", "")):
        args += ["--dev-bind", node, node]
    before = [h for h in hide if _under(workdir, h)]   # hidden dirs that contain the workspace
    after = [h for h in hide if h not in before]        # the rest (incl. ones inside it)
    for h in before:
        args += ["--perms", "0755", "--size", str(_HIDDEN_TMPFS_BYTES), "--tmpfs", str(h)]
    args += parents(workdir) + _mkdirs(workdir, tmpfs_roots)
    args += ["--perms", f"{ws_mode & 0o777:04o}", *(["--size", str(ws_bytes)] if ws_bytes else []),
             "--tmpfs", str(workdir)]
    for h in after:
        args += _mkdirs(h, tmpfs_roots)
        args += ["--perms", "0755", "--size", str(_HIDDEN_TMPFS_BYTES), "--tmpfs", str(h)]
    exposed: list[Path] = []
    for raw in [*expose, *ro_paths, *system_ro_paths()]:
        p = Path(raw).resolve()
        # re-expose what a hidden dir or the private /tmp covers (e.g. a venv in a clone under /tmp)
        if not p.is_dir() or p in exposed or not any(_under(p, h) for h in tmpfs_roots):
            continue
        if any(_under(p, e) for e in exposed):
            continue
        exposed.append(p)
        args += parents(p) + _mkdirs(p, tmpfs_roots)
        args += ["--ro-bind", str(p), str(p)]
    args += ["--remount-ro", "/"]  # the root tmpfs: no files can be made beside the binds
    args += _ns_args(root_mode)
    args += ["--hostname", "sandbox", "--die-with-parent", "--new-session",
             "--chdir", str(workdir), "--clearenv"]
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args


# --------------------------------------------------------------------------- process tree

def _tree(root: int) -> list[psutil.Process]:
    """root and all its descendants (psutil walks /proc once)."""
    try:
        p = psutil.Process(root)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


def _descendants(root: int) -> list[int]:
    return [p.pid for p in _tree(root)[1:]]


_ROLLUP = (b"Pss_Anon:", b"Pss_Shmem:")
_STATUS = (b"RssAnon:", b"RssShmem:")


def _process_memory(pid: int, precise: bool = False) -> int:
    """One process's anonymous memory, shared anonymous memory included (MAP_SHARED mappings,
    mapped memfds, SysV segments and tmpfs files it maps). Cheap (status, ~0.05 ms): resident
    anonymous + resident shmem, which counts a page shared by n processes n times (an upper
    bound). `precise` (smaps_rollup, which walks the page tables: ~25 ms for a process that
    imported torch, measured): the proportional set size, a page shared by n processes counting
    1/n in each, so once in the tree."""
    for name, fields in ((("smaps_rollup", _ROLLUP),) if precise else ()) + (("status", _STATUS),):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                lines = [ln for ln in f.read().splitlines() if ln.startswith(fields)]
        except OSError:
            continue
        if len(lines) == 2:
            return sum(int(ln.split()[1]) for ln in lines) << 10
    return 0


def _memfd_bytes(pids: Sequence[int]) -> int:
    """Memory held in memfds the tree has open (each counted once): written with write(), never
    mapped, a memfd is in no process's RSS and under no RLIMIT_AS. A memfd that is also mapped
    counts here and in _process_memory (conservative: measured memfd use in ML code is rare)."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            link = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(link).startswith("/memfd:"):
                    continue
                st = os.stat(link)
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def _tree_memory_bytes(root: int, sandboxed: bool, precise: bool = False) -> int:
    """Anonymous and shared-anonymous memory of the process tree (see _process_memory), memfds
    it holds, plus (sandboxed) what sits in its private tmpfs /tmp and /dev/shm (RAM that
    belongs to no process)."""
    pids = [p.pid for p in _tree(root)]
    total = sum(_process_memory(pid, precise) for pid in pids) + _memfd_bytes(pids)
    if sandboxed:
        total += _sandbox_tmpfs_bytes(pids[1:])
    return total


def _sandbox_tmpfs_bytes(pids: Sequence[int]) -> int:
    try:
        own_ns = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return 0
    for pid in reversed(pids):  # leaves first: surely inside the sandbox's mount namespace
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == own_ns:
                continue
            used = 0
            for m in ("tmp", "dev/shm"):
                st = os.statvfs(f"/proc/{pid}/root/{m}")
                if st.f_blocks:
                    used += (st.f_blocks - st.f_bfree) * st.f_frsize
            return used
        except OSError:
            continue
    return 0


def workspace_usage(root: Path, max_entries: int) -> tuple[int, int]:
    """(bytes allocated on disk, entries) under root, links not followed, hard links counted
    once; stops counting after max_entries entries (so a million tiny files cost one bounded walk)."""
    total, n, seen, stack = 0, 0, set(), [str(root)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                n += 1
                if n > max_entries:
                    return total, n
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return total, n


def _pids_of_uid(uid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["uids"]):
        uids = p.info.get("uids")
        if uids is not None and uid in (uids.real, uids.effective):
            out.append(p.pid)
    return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_tree(root: int) -> list[int]:
    """SIGKILL the process group of root and every descendant; returns the pids it saw."""
    pids = _descendants(root)
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill(root)
    for p in pids:
        _kill(p)
    return pids


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(pids: Iterable[int], timeout: float = 5.0) -> None:
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = {p for p in pending if _alive(p)}
        if pending:
            time.sleep(0.02)


def _sweep_uid(uid: int, timeout: float = 5.0) -> None:
    """Kill every process of the (ephemeral) uid until none is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = _pids_of_uid(uid)
        if not pids:
            return
        for p in pids:
            _kill(p)
        time.sleep(0.02)
    log.warning("runner: processes of sandbox uid %s survived %.0fs of SIGKILL", uid, timeout)


# --------------------------------------------------------------------------- the workspace filesystem

def _sandbox_pid(root: int) -> int | None:
    """A process inside the sandbox's mount namespace (leaves of the tree first)."""
    try:
        own = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return None
    for p in reversed(_tree(root)[1:]):
        try:
            if os.readlink(f"/proc/{p.pid}/ns/mnt") != own:
                return p.pid
        except OSError:
            continue
    return None


def _open_sandbox_workspace(root: int, workdir: Path) -> int:
    """An open folder on the sandbox's own workspace filesystem, reached through a process of the
    sandbox while it waits. Held open, it keeps that filesystem and what the run leaves in it
    readable after the sandbox is gone, until it is closed (then the kernel frees it)."""
    pid = _sandbox_pid(root)
    if pid is None:
        raise RuntimeError("runner: no process of the sandbox was found to reach its workspace")
    fd = os.open(f"/proc/{pid}/root{workdir}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if os.fstat(fd).st_dev == os.stat(workdir).st_dev:
        os.close(fd)
        raise RuntimeError(f"runner: the sandbox's {workdir} is the host folder, not a filesystem of its own")
    return fd


def _wait_ready(ready_fd: int, timeout: float) -> bool | None:
    """True when the shim says the sandbox is set up, False when it ended first (bwrap failed:
    its message is on stderr), None when neither happened within timeout."""
    r, _, _ = select.select([ready_fd], [], [], max(0.0, timeout))
    if not r:
        return None
    return os.read(ready_fd, 1) == b"r"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}" + (f": {e.filename}" if e.filename else "")
    return str(e)


def _fill_workspace(root: int, ready_fd: int, go_fd: int, workdir: Path, bounds: Bounds,
                    inner: Sequence[str], owner: tuple[int, int] | None, timeout: float,
                    ) -> tuple[int | None, str | None, str | None]:
    """Wait until the sandbox is set up, copy the host workspace into the sandbox's filesystem
    and let the command start. Returns (the open workspace filesystem or None, killed_reason,
    note); without a filesystem nothing is copied back."""
    try:
        ready = _wait_ready(ready_fd, min(_READY_S, timeout))
        if ready is None:
            return None, "timeout", "the sandbox was not set up in time"
        if not ready:
            return None, None, None
        fd = _open_sandbox_workspace(root, workdir)
        try:
            copy_tree(workdir, fd, bounds, skip=inner, owner=owner, unlock=True)
            if owner is not None:
                os.fchown(fd, *owner)
        except (WorkspaceLimitError, OSError) as e:
            os.close(fd)
            return None, "disk", ("the workspace could not be copied into its filesystem, the command did not "
                                  f"start: {_reason(e)}")
        os.write(go_fd, b"g")
        return fd, None, None
    finally:
        os.close(ready_fd)
        os.close(go_fd)


def _fs_usage(fd: int) -> tuple[int, int]:
    """(bytes used, entries) of the workspace filesystem open as fd (its root not counted)."""
    st = os.fstatvfs(fd)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, max(0, st.f_files - st.f_ffree - 1)


def _inner_hidden(workdir: Path, hidden: Sequence[Path]) -> list[str]:
    """Hidden dirs inside the workspace, relative: never copied in (the sandbox sees them empty)
    nor back (the host's stay as they are)."""
    return [h.relative_to(workdir).as_posix() for h in _normalise_dirs(hidden) if h != workdir and _under(h, workdir)]


def _copy_back(fd: int, workdir: Path, bounds: Bounds, keep: Sequence[str],
               owner: tuple[int, int] | None) -> str | None:
    """Make the host workspace hold what the run left in its filesystem; None when done, else
    why not. The whole tree is checked against the bounds first, so a refusal leaves the host
    folder as it was before the run; then only what differs is written (a file the run left
    as it was stays, its content compared byte for byte)."""
    try:
        scan(fd, bounds, skip=keep, unlock=True)
    except (WorkspaceLimitError, OSError) as e:
        return ("the run's files were not copied back to the host (the workspace keeps what it held "
                f"before the run): {_reason(e)}")
    try:
        copy_tree(fd, workdir, bounds, skip=keep, owner=owner, sync=True, unlock=True)
    except (WorkspaceLimitError, OSError) as e:
        return f"the run's files were copied back to the host only in part: {_reason(e)}"
    return None


def _check_in_place(workdir: Path, bounds: Bounds) -> str | None:
    """Unsandboxed: whether what the run left in the host folder is within bounds (so no later
    walk, copy or hash of it is refused or runs away); None when it is."""
    try:
        scan(workdir, bounds)
    except (WorkspaceLimitError, OSError) as e:
        return f"the workspace is past its limits after the run: {_reason(e)}"
    return None


def _note(path: Path, text: str) -> None:
    """Append the runner's own line to a log: the last line, which the attempt records as its error."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "a") as f:
        f.write(f"\nrunner: {text}\n")


def _out_of_space(stderr_path: Path) -> bool:
    tail = read_tail(stderr_path)
    return any(m in tail for m in _OUT_OF_SPACE)


# --------------------------------------------------------------------------- output

def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o644)


# --------------------------------------------------------------------------- running

def _wait_exit(proc: subprocess.Popen, pidfd: int | None, timeout: float) -> bool:
    """Wait up to timeout for proc to exit WITHOUT reaping it (so its pid/pgid stay ours)."""
    if pidfd is not None:
        r, _, _ = select.select([pidfd], [], [], max(0.0, timeout))
        return bool(r)
    end = time.monotonic() + timeout
    while True:
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(min(0.02, max(0.0, end - time.monotonic())))


def _disk_over(ws_fd: int | None, workdir: Path, disk_mb: int | None, disk_files: int) -> bool:
    """The polled quota (a second line behind the sized filesystem; the only one unsandboxed)."""
    size, entries = _fs_usage(ws_fd) if ws_fd is not None else workspace_usage(workdir, disk_files)
    return (disk_mb is not None and size > int(disk_mb) << 20) or entries > disk_files


def run_sandboxed(command: list[str], workdir: Path, *, timeout_s: float, memory_mb: int = 4096,
                  max_procs: int = 256, max_file_mb: int = 512, env: dict[str, str] | None = None,
                  sandbox: bool = True, python: str | None = None,
                  logs_dir: Path | None = None, hide: Sequence[Path | str] | None = None,
                  limit_address_space: bool = True, disk_mb: int | None = DEFAULT_DISK_MB,
                  disk_files: int = DEFAULT_DISK_FILES, ro_paths: Sequence[Path | str] = ()) -> ProcessResult:
    """Run an untrusted command in workdir; see the module docstring for what is enforced.

    ``hide`` replaces the default hidden dirs (``default_hidden_paths()``); ``logs_dir``
    defaults to ``WORKDIR/../logs``; ``ro_paths``: more host dirs the sandbox sees read-only
    (data); ``disk_mb``/``disk_files``: the workspace's quota (None: no byte quota): the size of
    the sandbox's workspace filesystem, what may be copied back, and the polled second line.
    Never raises for what the command does (a workspace past its limits is a result with
    killed_reason "disk" and the reason as the last line of stderr); raises RuntimeError if
    ``sandbox`` is requested and bubblewrap does not work here.
    """
    if not command:
        raise ValueError("empty command")
    workdir = Path(workdir).resolve()
    if not workdir.is_dir():
        raise FileNotFoundError(f"workdir not found: {workdir}")
    if workdir == Path("/"):
        raise ValueError("refusing to run with / as the workspace")
    if sandbox:
        ok, why = sandbox_available()
        if not ok:
            raise RuntimeError(f"Sandboxed run requested but unavailable: {why}"
                               + ("" if INSTALL_HINT in why else f" {INSTALL_HINT}"))
    python = str(Path(python or sys.executable).absolute())
    command = [str(c) for c in command]
    if command[0] in ("python", "python3"):
        command = [python, *command[1:]]

    logs_dir = Path(logs_dir) if logs_dir else workdir.parent / "logs"
    logs_dir.mkdir(parents=True, exist_ok=True)
    stem = (f"{workdir.name}-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
            f"-{os.getpid()}-{next(_counter)}")
    stdout_path, stderr_path = logs_dir / f"{stem}.stdout.log", logs_dir / f"{stem}.stderr.log"

    mem_bytes = int(memory_mb) << 20
    as_bytes = 2 * mem_bytes if limit_address_space else -1
    fsize_bytes = int(max_file_mb) << 20
    full_env = build_env(workdir, python, env)
    bounds = workspace_bounds(disk_mb, disk_files)
    root_mode = sandbox and os.geteuid() == 0
    uid = gid = -1
    ws_st = workdir.stat()
    # as root the files copied back belong to the workspace's owner, as the folder does
    back_owner = ((ws_st.st_uid, ws_st.st_gid) if root_mode and (ws_st.st_uid, ws_st.st_gid)
                  != (os.geteuid(), os.getegid()) else None)
    if root_mode:
        uid = gid = _EPHEMERAL_UID_BASE + secrets.randbelow(_EPHEMERAL_UID_SPAN)
    ready_r, ready_w, go_r, go_w = (*os.pipe(), *os.pipe()) if sandbox else (-1, -1, -1, -1)

    shim = [sys.executable, "-I", "-S", "-c", _SHIM, str(uid), str(gid),
            str(int(max_procs) if sandbox else -1), str(as_bytes), str(fsize_bytes), str(ready_w), str(go_r), "--"]
    inner: list[str] = []
    if sandbox:
        hidden = [Path(h) for h in (default_hidden_paths() if hide is None else hide)]
        inner = _inner_hidden(workdir, hidden)
        expose = _interpreter_roots(python) + _interpreter_roots(sys.executable)
        if root_mode:
            # a host dir the ephemeral uid cannot traverse (e.g. /root 0700 holding pyenv)
            # becomes an empty tmpfs, so what lies below it can be bound back reachable
            for p in [workdir, *expose]:
                anc = _first_untraversable_ancestor(p)
                if anc is not None:
                    hidden.append(anc)
        argv = bwrap_argv(workdir, env=full_env, hide=hidden, expose=expose, ro_paths=ro_paths,
                          tmp_bytes=mem_bytes, root_mode=root_mode, bwrap=shutil.which("bwrap") or "bwrap",
                          ws_bytes=bounds.max_bytes, ws_mode=stat.S_IMODE(ws_st.st_mode)) + shim + command
    else:
        # RLIMIT_NPROC counts all the caller's processes outside a namespace: not set here
        argv = shim + command
    log.debug("runner argv: %s", argv)

    out_fd, err_fd = _open_log(stdout_path), _open_log(stderr_path)
    start = time.monotonic()
    killed_reason: str | None = None
    note: str | None = None
    peak = 0
    ws_fd: int | None = None
    swept = False
    try:
        try:
            proc = subprocess.Popen(argv, cwd=workdir, env=full_env, stdin=subprocess.DEVNULL,
                                    stdout=out_fd, stderr=err_fd, start_new_session=True,
                                    close_fds=True, pass_fds=(ready_w, go_r) if sandbox else ())
        except BaseException:
            for fd in (ready_r, go_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (out_fd, err_fd, ready_w, go_r):
                if fd >= 0:
                    os.close(fd)
        try:
            pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            if sandbox:
                sandbox_owner = (uid, gid) if root_mode else None
                ws_fd, killed_reason, note = _fill_workspace(proc.pid, ready_r, go_w, workdir, bounds, inner,
                                                             sandbox_owner, float(timeout_s))
            start = time.monotonic()
            deadline = start + float(timeout_s)
            next_disk = start + (POLL_S if ws_fd is not None else DISK_POLL_S)
            seen: list[int] = []
            while killed_reason is None:
                if _wait_exit(proc, pidfd, min(POLL_S, max(0.0, deadline - time.monotonic()))):
                    break
                now = time.monotonic()
                if now >= deadline:
                    killed_reason = "timeout"
                else:
                    used = _tree_memory_bytes(proc.pid, sandbox)
                    if used > mem_bytes:  # over by the cheap upper bound: count shared pages once
                        used = _tree_memory_bytes(proc.pid, sandbox, precise=True)
                    peak = max(peak, used)
                    if used > mem_bytes:
                        killed_reason = "memory"
                    elif (ws_fd is not None or disk_mb is not None) and now >= next_disk:
                        next_disk = now + (POLL_S if ws_fd is not None else DISK_POLL_S)
                        if _disk_over(ws_fd, workdir, disk_mb, disk_files):
                            killed_reason = "disk"
            if killed_reason:
                seen = _kill_tree(proc.pid)
            # leftovers in the process group (unsandboxed daemons that did not setsid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        except BaseException:  # interrupted (KeyboardInterrupt, run cancelled): no orphans
            _kill_tree(proc.pid)
            proc.wait()
            raise
        finally:
            if pidfd is not None:
                os.close(pidfd)
        rc = proc.wait()
        duration = time.monotonic() - start
        _wait_gone(seen)
        if root_mode:
            _sweep_uid(uid)
            swept = True
        # every process of the sandbox is gone (its PID namespace died with it): what its
        # filesystem holds is final
        if killed_reason is None and rc != 0 and _out_of_space(stderr_path):
            killed_reason = "disk"  # the sized filesystem (or /tmp) refused a write: ENOSPC
        if ws_fd is not None:
            note = _copy_back(ws_fd, workdir, bounds, inner, back_owner) or note
        elif not sandbox:
            note = _check_in_place(workdir, bounds) or note
    finally:
        if ws_fd is not None:
            os.close(ws_fd)  # the sandbox's workspace filesystem is freed here
        if root_mode and not swept:
            _sweep_uid(uid)
    if note:
        _note(stderr_path, note)
        killed_reason = killed_reason or "disk"

    exit_code: int | None = rc
    if killed_reason:
        exit_code = None
    elif rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or (rc != 0 and any(
            _size(p) >= fsize_bytes for p in (stdout_path, stderr_path))):
        # SIGXFSZ, or (Python ignores SIGXFSZ) EFBIG on a log that reached max_file_mb
        killed_reason = "file_size"
    return ProcessResult(
        command=command, workdir=str(workdir), exit_code=exit_code,
        timed_out=killed_reason == "timeout", killed_reason=killed_reason,
        duration_s=round(duration, 3), stdout_path=str(stdout_path),
        stderr_path=str(stderr_path), stdout_tail=read_tail(stdout_path),
        stderr_tail=read_tail(stderr_path), sandboxed=sandbox,
        peak_memory_mb=round(peak / (1 << 20), 1),
    )


def unsandboxed_by_environment() -> bool:
    """The one switch that turns the sandbox off: RESEARCHLOOP_UNSANDBOXED=1 in the environment
    of the process that runs the code, read at each run (never run config, which the UI's
    launchpad could set)."""
    return settings().unsandboxed


def chosen_backend(execution: ExecutionSpec | None = None) -> str:
    """Where an attempt runs: the topic's `execution.backend` when it names one, else
    RESEARCHLOOP_BACKEND (read at each run; default local). Neither is run config: the UI's
    launchpad cannot move attempts, nor switch their sandbox off (see unsandboxed_by_environment)."""
    return (execution.backend if execution is not None else None) or settings().backend


def execution_kwargs(execution: ExecutionSpec | None) -> dict:
    """Runner.run's `execution` keyword for a topic's block, empty when the topic has none (so
    runners written before the keyword, such as test fakes, keep working for those topics)."""
    return {"execution": execution} if execution is not None else {}


class Runner(dg.ConfigurableResource):
    """Runs generated experiment code: bubblewrap sandbox, rlimits, memory watchdog, timeout,
    disk quota. Whether it sandboxes is not configurable here: see unsandboxed_by_environment."""

    memory_mb: int = pydantic.Field(
        default=4096, description="anonymous + shared memory of the whole process tree (watchdog kill)")
    disk_mb: int = pydantic.Field(default=DEFAULT_DISK_MB, description="disk use of one workspace (watchdog kill)")
    disk_files: int = pydantic.Field(default=DEFAULT_DISK_FILES, description="files and folders in one workspace")
    max_procs: int = pydantic.Field(default=256, description="RLIMIT_NPROC (processes+threads)")
    max_file_mb: int = pydantic.Field(default=512, description="RLIMIT_FSIZE (also caps logs)")
    limit_address_space: bool = pydantic.Field(
        default=True, description="RLIMIT_AS = 2 x memory_mb per process; turn off for CUDA")

    def run(self, command: list[str], workdir: str | Path, timeout_s: float,
            env: dict[str, str] | None = None, memory_mb: int | None = None,
            hide: Sequence[Path | str] = (), execution: ExecutionSpec | None = None) -> ProcessResult:
        """memory_mb overrides the resource's limit for this run (e.g. a topic's budget); `hide`
        adds dirs to the default hidden ones (e.g. a topic folder holding a scorer's labels).
        `execution`: the topic's `execution:` block (None: the environment decides, see
        `chosen_backend`). On the ray backend the attempt runs as a Ray task under the same sandbox
        on a worker, asking for the block's cpus / gpus / resources (each empty one: the environment's),
        its workspace changes and logs brought back (resources/ray_backend.py)."""
        t0 = time.time()
        if chosen_backend(execution) == "ray":
            from resources.ray_backend import run_on_ray

            res = run_on_ray(list(command), Path(workdir), timeout_s=timeout_s, memory_mb=memory_mb or self.memory_mb,
                             env=env, hide=hide, limit_address_space=self.limit_address_space,
                             limits={"max_procs": self.max_procs, "max_file_mb": self.max_file_mb,
                                     "sandbox": self.sandboxed(), "disk_mb": self.disk_mb,
                                     "disk_files": self.disk_files},
                             execution=execution)
        else:
            res = run_sandboxed(list(command), Path(workdir), timeout_s=timeout_s,
                                memory_mb=memory_mb or self.memory_mb, max_procs=self.max_procs,
                                max_file_mb=self.max_file_mb, env=env, sandbox=self.sandboxed(),
                                limit_address_space=self.limit_address_space,
                                disk_mb=self.disk_mb, disk_files=self.disk_files,
                                hide=[*default_hidden_paths(), *hide] if hide else None)
        # RESEARCHLOOP_TIMING_LOG (resources/timing_log.py): the run's time, for the effectiveness bench
        log_span(SPAN_EXPERIMENT, time.time() - t0, workdir=str(workdir), exit_code=res.exit_code)
        return res

    def sandboxed(self) -> bool:
        return not unsandboxed_by_environment()

    def prepare_workspace(self, template_dir: str | Path, dest: str | Path) -> Path:
        return prepare_workspace(Path(template_dir), Path(dest), bounds=workspace_bounds(self.disk_mb, self.disk_files))
