"""Where things live: the repo, DAGSTER_HOME and the folders under it."""
from __future__ import annotations

import json
import os
from pathlib import Path

from resources.settings import settings

REPO_ROOT = Path(__file__).resolve().parents[1]


def dagster_home() -> Path:
    """$DAGSTER_HOME, or the repo's dagster_home/ (the Makefile exports it)."""
    return Path(settings().dagster_home or REPO_ROOT / "dagster_home").resolve()


def under_home(*parts: str) -> Path:
    p = dagster_home().joinpath(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p


def experiments_root() -> Path:
    return Path(settings().experiments or REPO_ROOT / "experiments").resolve()


TOPIC_DIRS = "topic_dirs.json"  # under DAGSTER_HOME: topic name -> folder, for topics outside experiments/


def register_topic_dir(name: str, folder: Path) -> None:
    """Remember that topic `name` lives in `folder` (outside experiments/), so that the stages and
    sensors, which know a topic by its partition name only, read the same folder the CLI was given.
    Nothing is written for a folder that is experiments/<name> itself."""
    folder = Path(folder).resolve()
    if folder == experiments_root() / name:
        return
    path = dagster_home() / TOPIC_DIRS
    known = json.loads(path.read_text()) if path.exists() else {}
    if known.get(name) == str(folder):
        return
    known[name] = str(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: a reader sees the old map or the new one


def registered_topic_dir(name: str) -> Path | None:
    """The folder `register_topic_dir` recorded for topic `name`, if it still holds a topic.yaml."""
    path = dagster_home() / TOPIC_DIRS
    try:
        folder = json.loads(path.read_text()).get(name) if path.exists() else None
    except (OSError, ValueError):
        return None
    return Path(folder) if folder and (Path(folder) / "topic.yaml").exists() else None


def resolve_topic_dir(topic: str) -> Path:
    """A path to a topic folder, or a topic name: its folder under experiments/, else the folder the
    CLI registered for that name (`register_topic_dir`), else experiments/<name> (which then fails
    to load with a clear error)."""
    p = Path(topic)
    if (p / "topic.yaml").exists():
        return p.resolve()
    here = experiments_root() / topic
    if (here / "topic.yaml").exists():
        return here
    return registered_topic_dir(topic) or here
