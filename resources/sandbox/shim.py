"""The shim that runs inside the sandbox just before the command (trusted code).

The runner passes this file's source to its own interpreter as ``python -I -S -c SOURCE`` (no
site, no environment influence; the file itself need not be visible inside the sandbox), so it
imports nothing but the standard library and does its work only under ``__main__``: importing it
(the tests do) changes nothing.

It waits until the host has filled the workspace, then sets the rlimits, then (as root) drops to
the ephemeral uid, sets no_new_privs, installs the seccomp filter and execs the command.

argv: uid gid nproc as_bytes fsize_bytes ready_fd go_fd -- command...   (-1 = leave unchanged / none)
"""
import ctypes
import os
import resource
import sys

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# seccomp: no new user namespace (unshare/clone with CLONE_NEWUSER; clone3, whose flags a filter
# cannot read, answers ENOSYS so libc falls back to clone), and none of the syscalls behind
# most container escapes (setns, bpf, userfaultfd, perf_event_open, keyrings, io_uring, modules,
# kexec, open_by_handle_at), nor SysV shared memory or message queues (a detached segment or a
# queue holds RAM no process owns, out of the memory watchdog's sight; ML code uses shm_open,
# memfd or files instead). Other architectures are killed; unknown machines get no filter.
# machine -> (audit arch, unshare nr, clone nr, {blocked syscall: nr})
SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, dict(
        setns=308, bpf=321, userfaultfd=323, perf_event_open=298, keyctl=250, add_key=248, request_key=249,
        io_uring_setup=425, init_module=175, finit_module=313, kexec_load=246, kexec_file_load=320,
        open_by_handle_at=304, shmget=29, msgget=68)),
    "aarch64": (0xC00000B7, 97, 220, dict(
        setns=268, bpf=280, userfaultfd=282, perf_event_open=241, keyctl=219, add_key=217, request_key=218,
        io_uring_setup=425, init_module=105, finit_module=273, kexec_load=104, kexec_file_load=294,
        open_by_handle_at=265, shmget=194, msgget=186)),
}
CLONE3 = 435
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000


def wait_for_workspace(ready: int, go: int) -> None:
    """The sandbox is set up: say so on `ready`, and wait until the host has filled its workspace
    filesystem and says go on `go`."""
    os.write(ready, b"r")
    os.close(ready)
    got = os.read(go, 1)
    os.close(go)
    if got != b"g":
        sys.exit("runner shim: the workspace was not set up")


def lim(res: int, v: int) -> None:
    """Set rlimit `res` to v (soft and hard; capped at the hard limit); v < 0 leaves it unchanged."""
    if v < 0:
        return
    soft, hard = resource.getrlimit(res)
    if hard != resource.RLIM_INFINITY and v > hard:
        v = hard
    resource.setrlimit(res, (v, v))


def drop_privileges(libc: ctypes.CDLL, uid: int, gid: int) -> None:
    """As root: no capabilities, no groups, the ephemeral uid/gid for good."""
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        sys.exit("runner shim: could not drop privileges")


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The classic-BPF filter (code, jt, jf, k) for `machine`; None for a machine not in SYSCALLS."""
    nrs = SYSCALLS.get(machine)
    if not nrs:
        return None
    arch, unshare, clone, blocked = nrs
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL, EPERM, ENOSYS = 0x7FFF0000, 0x80000000, 0x50000 | 1, 0x50000 | 38
    prog = [(LD, 0, 0, 4), (JEQ, 1, 0, arch), (RET, 0, 0, KILL), (LD, 0, 0, 0),
            (JGE, 0, 1, X32_SYSCALL_BIT), (RET, 0, 0, KILL),  # the x32 ABI
            (JEQ, 0, 1, CLONE3), (RET, 0, 0, ENOSYS)]
    for nr in blocked.values():
        prog += [(JEQ, 0, 1, nr), (RET, 0, 0, EPERM)]
    for nr in (unshare, clone):
        prog += [(JEQ, 0, 4, nr), (LD, 0, 0, 16), (JSET, 0, 1, CLONE_NEWUSER), (RET, 0, 0, EPERM), (RET, 0, 0, ALLOW)]
    prog.append((RET, 0, 0, ALLOW))
    return prog


def install_seccomp(libc: ctypes.CDLL, prog: list[tuple[int, int, int, int]]) -> None:
    class F(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]

    class P(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F))]

    arr = (F * len(prog))(*[F(*i) for i in prog])
    fprog = P(len(prog), arr)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit("runner shim: could not install the seccomp filter")


def main(argv: list[str]) -> None:
    uid, gid, nproc, as_b, fsize_b, ready, go = (int(x) for x in argv[1:8])
    cmd = argv[9:]
    if ready >= 0:
        wait_for_workspace(ready, go)
    lim(resource.RLIMIT_CORE, 0)
    lim(resource.RLIMIT_FSIZE, fsize_b)
    lim(resource.RLIMIT_AS, as_b)
    lim(resource.RLIMIT_NPROC, nproc)
    libc = ctypes.CDLL(None, use_errno=True)
    if uid >= 0:
        drop_privileges(libc, uid, gid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit("runner shim: could not set no_new_privs")
    prog = seccomp_program(os.uname().machine)
    if prog:
        install_seccomp(libc, prog)
    try:
        os.execvp(cmd[0], cmd)
    except FileNotFoundError:
        sys.stderr.write(f"runner: command not found: {cmd[0]}\n")
        sys.exit(127)
    except PermissionError as e:
        sys.stderr.write(f"runner: cannot execute {cmd[0]}: {e}\n")
        sys.exit(126)


if __name__ == "__main__":
    main(sys.argv)
