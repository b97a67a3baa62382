"""Debian packages some slow tests need (PostgreSQL, Chromium): `make test-deps` (part of `make test`) installs them;
a test that finds one missing installs it with apt-get when running as root, else skips saying why."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

import pytest


def apt_install_or_skip(*packages: str) -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(f"missing Debian packages {' '.join(packages)} and no root/apt-get to install them: "
                    f"run `make test-deps` (or apt-get install {' '.join(packages)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # pytest-xdist workers may get here together: one apt-get at a time (dpkg has one lock).
    with open("/tmp/researchloop-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
            if r.returncode != 0:
                pytest.skip(f"could not install {' '.join(packages)} ({' '.join(cmd)}): {r.stderr[-800:]}")
