"""The sandbox for code written by an LLM (untrusted).

What one run gets (``run_in_sandbox`` with a ``SandboxLimits``, ``run_sandboxed``, or the ``Runner`` Dagster
resource in resources/runner.py):

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
* **seccomp** (installed by the shim, ``shim.py``, after no_new_privs): no new user namespace
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
  workspace (``resources/workspace_walk/``: no recursion; depth, path length, entries =
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

``sandbox=False`` (``run_in_sandbox``; for the ``Runner`` resource only
``RESEARCHLOOP_UNSANDBOXED=1`` in the environment, read at each run, never run config) is an
explicit opt-in to a plain subprocess: same env scrubbing, rlimits,
timeout and memory watchdog, but no filesystem/network isolation, and a daemon that double
forks and calls setsid escapes, and RLIMIT_NPROC is not set (outside a namespace it would
count every process of the calling user; for root it is not enforced at all).

Where each part lives:

* ``env.py``: the scrubbed environment (``build_env``), the hidden dirs, the interpreter's dirs;
* ``bwrap.py``: whether bubblewrap works (``sandbox_available``), its command line (``bwrap_argv``);
* ``shim.py``: the rlimit / uid / no_new_privs / seccomp shim that execs the command, a real
  module whose source is passed to ``python -I -S -c``;
* ``limits.py``: memory and disk accounting, the sweep of an ephemeral uid (the process
  helpers themselves are resources/processes.py);
* ``workspace.py``: ``prepare_workspace``, ``prune_attempts``, the copy into the sandbox's
  workspace filesystem and back;
* ``result.py``: ``ProcessResult`` and the log files;
* ``run.py``: ``run_in_sandbox`` / ``run_sandboxed``, the life cycle of one run.
"""
from resources.sandbox.bwrap import INSTALL_HINT, bwrap_argv, gpu_device_nodes, sandbox_available, system_ro_paths
from resources.sandbox.env import REPO_ROOT, build_env, default_hidden_paths
from resources.sandbox.limits import tree_memory_bytes, workspace_usage
from resources.sandbox.result import TAIL_CHARS, ProcessResult
from resources.sandbox.run import SandboxLimits, run_in_sandbox, run_sandboxed
from resources.sandbox.workspace import (
    DEFAULT_DISK_FILES,
    DEFAULT_DISK_MB,
    KEEP_ATTEMPTS,
    prepare_workspace,
    prune_attempts,
    workspace_bounds,
)

__all__ = [
    "DEFAULT_DISK_FILES", "DEFAULT_DISK_MB", "INSTALL_HINT", "KEEP_ATTEMPTS", "REPO_ROOT", "TAIL_CHARS",
    "ProcessResult", "SandboxLimits", "build_env", "bwrap_argv", "default_hidden_paths", "gpu_device_nodes",
    "prepare_workspace", "prune_attempts", "run_in_sandbox", "run_sandboxed", "sandbox_available", "system_ro_paths",
    "tree_memory_bytes", "workspace_bounds", "workspace_usage",
]
