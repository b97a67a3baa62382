"""The conventions of an experiment's workspace that editing and running share: the folder a
run writes its results to, the folder a scorer reads them from, and the removal of a topic's
hidden files (a scored topic's labels) from a fresh copy before anything runs there."""

from __future__ import annotations

from pathlib import Path

from resources.workspace_walk import remove_tree

OUT_DIR = "out"
PRED_DIR = "predictions"  # where a scorer's workspace holds the run's OUT_DIR


def remove_hidden(ws: Path, hidden: tuple[str, ...]) -> None:
    """Delete the topic's hidden files (and folders) from a freshly copied workspace."""
    for h in hidden:
        p = ws / h
        if p.is_symlink() or p.exists():
            remove_tree(p)
