"""`researchloop`: the loop from the command line, over the same assets the UI runs.

  researchloop run --topic NAME [--rounds N]   set up a topic and run rounds headless: the
                                               sensors' jobs (one run per round), their stop rules;
                                               --cancel-queued cancels the topic's queued runs first
  researchloop baseline --topic NAME [--seeds N] run only the reference code over its seeds and
                                               print the baseline: mean, std, interval, per seed
  researchloop status                          topics, rounds done, best result, baseline, tokens
  researchloop lineage IDEA_ID                 how an idea arose, what it changed and scored
  researchloop lineage TOPIC                   the topic's best code round by round (stacked wins)
  researchloop rank --topic T --papers F.jsonl rank a paper list for a topic (JSON lines out)
  researchloop debug SCRIPT                    run a script sandboxed and repair it from its traceback
"""
# One module per subcommand (its add_parser and cmd_*), what they share in common.py; this
# module only wires them into one parser.
from __future__ import annotations

import argparse

from pipelines.cli import baseline, debug, lineage, rank, run, status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="researchloop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for command in (run, baseline, status, lineage, rank, debug):
        command.add_parser(sub)
    args = p.parse_args(argv)
    return args.fn(args)
