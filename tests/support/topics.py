"""A valid toy topic.yaml and folders holding one."""
from __future__ import annotations

from pathlib import Path

import yaml

from schemas.topic import load_topic

VALID = {
    "name": "toy",
    "title": "Toy task",
    "description": "Classify 2D points.",
    "code": "experiment.py",
    "run": "python experiment.py --out_dir {out_dir}",
    "check": "python experiment.py --out_dir {out_dir} --dry_run",
    "metric": {"name": "accuracy", "goal": "maximize", "tolerance": 0.005},
    "budget": {"rounds": 3, "ideas_per_round": 2},
}


def set_budget(folder: Path, **budget) -> None:
    """Update the budget of the topic.yaml in `folder` (a test's copy of a topic)."""
    f = folder / "topic.yaml"
    spec = yaml.safe_load(f.read_text())
    spec["budget"].update(budget)
    f.write_text(yaml.safe_dump(spec, sort_keys=False))


def make_topic(root: Path, folder: str, spec: dict | None = None, *, text: str | None = None,
               code: str | None = "experiment.py") -> Path:
    d = root / folder
    d.mkdir(parents=True)
    (d / "topic.yaml").write_text(text if text is not None else yaml.safe_dump(spec))
    if code:
        (d / code).write_text("print('hi')\n")
    return d


def ideation(tmp_path: Path, section: dict):
    """The IdeationSpec of a valid toy topic whose topic.yaml has `section` as `ideation`."""
    return load_topic(make_topic(tmp_path, "toy", {**VALID, "ideation": section})).ideation
