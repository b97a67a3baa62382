"""Bounded, iterative walks over a workspace tree: the one place where the host walks, copies,
hashes and deletes what an attempt (untrusted code) left behind, so that every host access to a
workspace goes through the same bounds.

A run can leave any shape: thousands of nested folders, a million entries, a sparse file of a
terabyte holding nothing, hard links, FIFOs. So nothing here recurses (an explicit stack, one
open folder per level, ``os.scandir``), every walk is bounded (``Bounds``: depth, entries, bytes,
length of a relative path) and a walk past a bound raises ``WorkspaceLimitError`` with a reason a
person can read, which callers record as the attempt's failure instead of crashing the step.

* walking.py: ``walk``, ``scan`` and ``hash_files``; every entry reached through its open parent
  folder (``dir_fd``), never through a long path; bytes counted as a copy would write them
  (``copy_size`` = max(st_size, allocated blocks): a sparse file by its length, an fallocated one
  by what it holds; each hard link on its own);
* copying.py: ``copy_tree`` keeps holes, copies links as links, recreates FIFOs, leaves sockets
  and devices out, never keeps set-uid/set-gid bits, and can give every entry an owner (the
  sandbox's uid going in, the workspace owner's coming back);
* removing.py: ``remove_tree`` deletes any depth with no path longer than one name and no more
  open files than two.
"""
from __future__ import annotations

from resources.workspace_walk.copying import copy_tree
from resources.workspace_walk.removing import empty_dir, remove_tree
from resources.workspace_walk.walking import (
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_PATH_CHARS,
    Bounds,
    Entry,
    Totals,
    WorkspaceLimitError,
    copy_size,
    hash_files,
    scan,
    walk,
)

__all__ = [
    "MAX_DEPTH", "MAX_ENTRIES", "MAX_PATH_CHARS", "Bounds", "Entry", "Totals", "WorkspaceLimitError", "copy_size",
    "copy_tree", "empty_dir", "hash_files", "remove_tree", "scan", "walk",
]
