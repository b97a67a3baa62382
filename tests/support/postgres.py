"""A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries (installed with apt-get
when missing and running as root), a fresh cluster in a temp dir on a free port, one database,
password auth over TCP; stopped and deleted afterwards."""
from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.system_deps import apt_install_or_skip
from tests.support.ui import _free_port

PG_USER = "researchloop"


@dataclass(frozen=True)
class PgServer:
    host: str
    port: int
    user: str
    password: str
    db_name: str

    def env(self) -> dict[str, str]:
        """The variables dagster_home/dagster.yaml's Postgres block reads."""
        return {"RESEARCHLOOP_PG_HOST": self.host, "RESEARCHLOOP_PG_PORT": str(self.port),
                "RESEARCHLOOP_PG_USER": self.user, "RESEARCHLOOP_PG_PASSWORD": self.password,
                "RESEARCHLOOP_PG_DB": self.db_name}

    def connect(self):
        import psycopg2

        return psycopg2.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                dbname=self.db_name)


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def find_or_install_postgres() -> Path:
    """The bin dir of the newest installed PostgreSQL; apt-get installs Debian's when missing (as root)."""
    if (b := _bin_dir()) is None:
        apt_install_or_skip("postgresql")
        if (b := _bin_dir()) is None:
            pytest.skip("apt-get installed postgresql but no /usr/lib/postgresql/*/bin/initdb was found")
    return b


def _as_owner(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` system user then."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="session")
def postgres_server():
    """A running PostgreSQL with an empty database; yields a PgServer."""
    bindir = find_or_install_postgres()
    root = Path(tempfile.mkdtemp(prefix="researchloop-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, log, pwfile = root / "data", root / "server.log", root / "pw"
    password = secrets.token_hex(12)
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, "postgres", "postgres")
    port = _free_port()
    run = lambda cmd: subprocess.run(_as_owner(cmd), capture_output=True, text=True, timeout=300)  # noqa: E731
    r = run([str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "--pwfile", str(pwfile), "-E", "UTF8",
             "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--no-sync"])
    assert r.returncode == 0, f"initdb failed: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    r = run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "120", "-o",
             f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"])
    server_log = log.read_text()[-1500:] if log.exists() else ""
    assert r.returncode == 0, f"pg_ctl start failed: {r.stderr[-1500:]}\n{server_log}"
    try:
        server = PgServer("127.0.0.1", port, PG_USER, password, "postgres")
        conn = server.connect()
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE researchloop_test")
        conn.close()
        yield PgServer("127.0.0.1", port, PG_USER, password, "researchloop_test")
    finally:
        run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
