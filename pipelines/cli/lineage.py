"""`researchloop lineage IDEA_ID | TOPIC`: how an idea arose, what it changed and scored; for a
topic, its best code round by round (the queries are in pipelines/lineage.py)."""
from __future__ import annotations

from pipelines.cli.common import ensure_home
from pipelines.lineage import lineage


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("lineage", help="how an idea arose, what it changed, what it scored")
    p.add_argument("idea_id", help="e.g. pointcloud_classification/r1/some_idea; a topic name prints its best "
                   "code round by round (stacked wins)")
    p.set_defaults(fn=cmd_lineage)


def cmd_lineage(args) -> int:
    ensure_home()
    text = lineage(args.idea_id)
    print(text)
    return 0 if not text.startswith("unknown") else 1
