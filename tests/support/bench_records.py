"""The checks every section of a bench page must pass."""
from __future__ import annotations

import json
import re
import subprocess

from resources.paths import REPO_ROOT


def section_problems(head: str, body: str) -> list[str]:
    out = []
    if NO_RECORD in body.lower():
        if "|---" in body:
            out.append("a history section keeps a table")
        if figures := FIGURE.findall(body):
            out.append(f"a history section keeps figures: {figures[:5]}")
        return out
    scripts = {s if s.endswith(".py") else s.replace("-m bench.", "bench/") + ".py" for s in SCRIPT.findall(body)}
    records = set(RECORD.findall(body))
    if not scripts:
        out.append("names no script in bench/")
    commits = AT_COMMIT.findall(body)
    for s in sorted(scripts):
        if (REPO_ROOT / s).is_file():
            continue
        if not commits:
            out.append(f"script {s} does not exist")
        elif not any(in_history(c, s) is not False for c in commits):
            out.append(f"script {s} is at none of the commits named ({', '.join(commits)})")
    if not records:
        out.append("names no raw record (JSON or Parquet)")
    for r in records:
        path = REPO_ROOT / r
        if not path.is_file():
            out.append(f"record {r} does not exist")
            continue
        if path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except ValueError as e:
                out.append(f"record {r} is not JSON: {e}")
        if tracked(r) is False:
            out.append(f"record {r} is not committed")
    if not DATE.search(head + body) or "cores" not in head + body:
        out.append("does not say when and on what machine")
    if not SAMPLE.search(body):
        out.append("does not say whether it is in-sample or held-out")
    return out


NO_RECORD = "no record; not a result"


SCRIPT = re.compile(r"bench/[\w/]+\.py\b|-m bench\.\w+")  # a file, or the module `python -m` runs


RECORD = re.compile(r"bench/[\w/.-]+\.(?:json|parquet)(?![\w])")


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


SAMPLE = re.compile(r"in-sample|held-out|held out|not a sample", re.IGNORECASE)


AT_COMMIT = re.compile(r"at commit `([0-9a-f]{7,40})`")


# what a measured figure looks like in prose: a time, a rate, a ratio, an accuracy-like decimal
FIGURE = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|min|%|tok/s|GiB|MB|x)\b|\b\d+/\d+\b|\b0\.\d{2,}\b")


def tracked(path: str) -> bool | None:
    """Whether git tracks `path` (None: not a git checkout)."""
    r = _git("ls-files", "--error-unmatch", path)
    if r is None or (r.returncode != 0 and b"not a git repository" in r.stderr):
        return None
    return r.returncode == 0


def in_history(commit: str, path: str) -> bool | None:
    """Whether git has `path` at `commit` (None: not a git checkout)."""
    r = _git("cat-file", "-e", f"{commit}:{path}")
    if r is None or (r.returncode != 0 and b"not a git repository" in r.stderr):
        return None
    return r.returncode == 0


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
