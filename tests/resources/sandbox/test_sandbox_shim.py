"""The sandbox's shim (resources/sandbox/shim.py) on its own: importing it does nothing, its
seccomp program has the shape the kernel expects, and run the way the runner runs it
(``python -I -S -c SOURCE``, outside bubblewrap) it sets the rlimits and execs the command."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from resources.sandbox import shim
from resources.sandbox.run import SHIM_SOURCE


def run_shim(*cmd: str, fsize: int = -1) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-I", "-S", "-c", SHIM_SOURCE, "-1", "-1", "-1", "-1", str(fsize), "-1", "-1", "--", *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_runner_passes_the_module_source():
    assert SHIM_SOURCE == open(shim.__file__).read()


@pytest.mark.parametrize("machine", sorted(shim.SYSCALLS))
def test_seccomp_program_blocks_each_listed_syscall(machine):
    prog = shim.seccomp_program(machine)
    arch, unshare, clone, blocked = shim.SYSCALLS[machine]
    assert prog is not None and prog[-1] == (0x06, 0, 0, 0x7FFF0000)  # the default: allow
    assert (0x15, 1, 0, arch) in prog  # another architecture is killed
    eperm = 0x50000 | 1
    for nr in blocked.values():
        i = prog.index((0x15, 0, 1, nr))
        assert prog[i + 1] == (0x06, 0, 0, eperm)
    for nr in (unshare, clone):  # refused only with CLONE_NEWUSER
        i = prog.index((0x15, 0, 4, nr))
        assert prog[i + 2] == (0x45, 0, 1, shim.CLONE_NEWUSER) and prog[i + 3] == (0x06, 0, 0, eperm)
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in prog)


def test_unknown_machine_gets_no_filter():
    assert shim.seccomp_program("sparc64") is None


def test_shim_execs_the_command_with_its_limits():
    r = run_shim(sys.executable, "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], "
                                       "resource.getrlimit(resource.RLIMIT_CORE)[1])", fsize=1 << 20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(1 << 20), "0"]


def test_shim_refuses_a_new_user_namespace():
    if shim.seccomp_program(os.uname().machine) is None:
        pytest.skip("no seccomp filter for this machine")
    r = run_shim(sys.executable, "-c", "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                                       "print(libc.unshare(0x10000000), ctypes.get_errno())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["-1", "1"]  # EPERM


def test_shim_reports_a_missing_command():
    r = run_shim("/nonexistent/command")
    assert r.returncode == 127 and "runner: command not found: /nonexistent/command" in r.stderr
