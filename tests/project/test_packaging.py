"""Packaging: pyproject.toml declares every version once, requirements.lock (generated from it by
`make lock`) pins and hashes every installed package, and no code edits the import path."""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support import paths

ROOT = paths.REPO
LOCK = ROOT / "requirements.lock"


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of a pip-compile lock with --generate-hashes."""
    out: dict[str, tuple[str, list[str]]] = {}
    entry: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)\s*\\?", line.strip())
            assert m, f"lock line is not name==version: {line!r}"
            entry = canonicalize_name(m[1])
            out[entry] = (m[2], [])
        else:
            m = re.search(r"--hash=sha256:([0-9a-f]{64})", line)
            assert m and entry, f"unexpected lock line: {line!r}"
            out[entry][1].append(m[1])
    return out


def test_parse_lock_reads_names_versions_and_hashes():
    text = ("# comment\nfoo-bar[x]==1.2 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64
            + "\n    # via baz\nQux==3.0+cpu \\\n    --hash=sha256:" + "c" * 64 + "\n")
    assert parse_lock(text) == {"foo-bar": ("1.2", ["a" * 64, "b" * 64]), "qux": ("3.0+cpu", ["c" * 64])}
    with pytest.raises(AssertionError):
        parse_lock("foo>=1.0\n")


def test_every_declared_dependency_is_pinned_once_and_locked_at_that_version():
    lock = parse_lock(LOCK.read_text())
    names = [canonicalize_name(r.name) for r in declared()]
    assert len(names) == len(set(names)), "a package declared twice in pyproject.toml"
    for req in declared():
        (spec,) = req.specifier  # exactly one specifier: an == pin
        assert spec.operator == "==", f"{req} is not pinned with =="
        assert canonicalize_name(req.name) in lock, f"{req.name} is not in requirements.lock: run `make lock`"
        version, _ = lock[canonicalize_name(req.name)]
        # the lock may add a local label (torch 2.13.0 -> 2.13.0+cpu), never another release
        assert Version(version).public == Version(spec.version).public, (
            f"{req.name}: pyproject says {spec.version}, requirements.lock {version}: run `make lock`")


def test_every_locked_package_has_hashes_and_the_build_tools_are_locked():
    lock = parse_lock(LOCK.read_text())
    assert len(lock) > 100  # the indirect dependencies are there, not only the ~30 direct ones
    assert all(hashes for _, hashes in lock.values())
    for tool in ("pip", "setuptools"):  # the venv's pip is upgraded, and the project built, from the lock
        assert tool in lock
    assert lock["torch"][0] == "2.13.0+cpu"  # the CPU build; a plain 2.13.0 would be the CUDA one


def test_lock_hash_of_torch_is_the_wheel_pip_finds_on_disk():
    wheels = sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl"))
    if not wheels:
        pytest.skip("no local torch wheel on this machine")
    digest = hashlib.sha256()
    with wheels[0].open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() in parse_lock(LOCK.read_text())["torch"][1]


def test_the_environment_holds_exactly_the_locked_versions():
    lock = parse_lock(LOCK.read_text())
    # importing ray puts its vendored copies (ray/thirdparty_files: colorama, psutil) on sys.path;
    # they are part of the locked ray wheel, not installs of their own
    paths = [p for p in sys.path if not p.rstrip("/").endswith("thirdparty_files")]
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in md.distributions(path=paths)}
    installed.pop("researchloop", None)  # the project itself, editable
    assert {n: v for n, v in installed.items() if lock.get(n, (None,))[0] != v} == {}, "not from the lock"
    assert sorted(set(lock) - set(installed)) == []


def test_no_code_edits_the_import_path():
    skip = {".venv", ".git", "dagster_home", "build"}
    offenders = [f"{p.relative_to(ROOT)}:{i}"
                 for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts)
                 for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
                 if re.search(r"sys\.path\s*(\.\s*(insert|append|extend)\b|\[|\+?=)", line)]
    assert offenders == []
