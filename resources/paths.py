"""Where things live: the repo, DAGSTER_HOME and the folders under it."""
from __future__ import annotations

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


def resolve_topic_dir(topic: str) -> Path:
    """A topic name (folder under experiments/) or a path to a topic folder."""
    p = Path(topic)
    if (p / "topic.yaml").exists():
        return p.resolve()
    return experiments_root() / topic
