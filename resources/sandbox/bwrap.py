"""bubblewrap: whether it works here, and the command line that builds the sandbox (namespaces,
the read-only bind set, private tmpfs, hidden dirs, the workspace's own sized tmpfs)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from resources.settings import settings

INSTALL_HINT = (
    "bubblewrap (bwrap) is needed to run generated code in a sandbox: install it "
    "(`apt-get install bubblewrap`, or `make setup`), or set RESEARCHLOOP_UNSANDBOXED=1 in the "
    "environment to run generated code as a plain, unisolated subprocess (sandbox: false)."
)
_HIDDEN_TMPFS_BYTES = 1 << 20


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


def under(p: Path, root: Path) -> bool:
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


def normalise_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """The existing dirs among paths, resolved, each once, in order."""
    return list(dict.fromkeys(p for p in _resolved(paths) if p.is_dir()))


def _mkdirs(path: Path, tmpfs_roots: Sequence[Path]) -> list[str]:
    """--dir 0755 for every ancestor of path that lives in a sandbox tmpfs (so a non-root
    sandbox uid can traverse to path by its absolute name)."""
    args: list[str] = []
    for anc in reversed(path.parents):
        if any(anc != r and under(anc, r) for r in tmpfs_roots):
            args += ["--perms", "0755", "--dir", str(anc)]
    return args


def first_untraversable_ancestor(path: Path) -> Path | None:
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
                  if p.exists() and not any(under(p, Path(s)) for s in ("/tmp", "/dev", "/proc"))},
                 key=lambda p: len(p.parts))
    return [p for i, p in enumerate(out) if not any(under(p, q) for q in out[:i])]


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
    hide = normalise_dirs(hide)
    # only dirs the sandbox would see need hiding: under a bind or the workspace (not /tmp, /dev)
    hide = [h for h in hide if under(h, workdir) or (any(under(h, b) for b in binds)
                                                      and not (under(h, Path("/tmp")) or under(h, Path("/dev"))))]
    # drop dirs nested in another hidden dir (its tmpfs already hides them), unless the
    # workspace bind sits between the two and brings them back
    hide = [p for p in hide if not any(
        q != p and under(p, q) and not (under(p, workdir) and under(workdir, q))
        for q in hide)]
    tmpfs_roots = [Path("/tmp"), Path("/dev/shm"), *hide]
    made: set[Path] = set()

    def parents(path: Path) -> list[str]:
        """--dir 0755 for the ancestors of path on the sandbox's root tmpfs (bwrap would make
        them 0700, which the ephemeral uid cannot traverse)."""
        out: list[str] = []
        for anc in reversed(Path(path).parents):
            if anc == Path("/") or anc in made or any(under(anc, r) for r in [*binds, *tmpfs_roots]):
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
    before = [h for h in hide if under(workdir, h)]   # hidden dirs that contain the workspace
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
        if not p.is_dir() or p in exposed or not any(under(p, h) for h in tmpfs_roots):
            continue
        if any(under(p, e) for e in exposed):
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
