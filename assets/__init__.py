"""One folder per stage, named after its asset: `defs.py` holds the Dagster definitions (the
asset and its checks), the other modules the stage's pure logic, `prompts.py` its prompts.
Helpers every stage uses (partitions, checks, metadata, plots, names, verdict statistics) live in
`assets/shared/`, the code-editing kit (edit formats, tracebacks, repair rules) in `assets/editing/`.
The stages import each other in one layer order only (the contract in `.importlinter`)."""
from assets.baseline_results.defs import baseline_results
from assets.best_code.defs import best_code
from assets.experiment_plans.defs import experiment_plans
from assets.feedback_summary.defs import feedback_summary
from assets.filtered_ideas.defs import filtered_ideas
from assets.ideas.defs import ideas
from assets.paper_rankings.defs import paper_rankings
from assets.papers.defs import papers
from assets.patched_code.defs import patched_code
from assets.round_reference.defs import round_reference
from assets.run_results.defs import run_results
from assets.topic_brief.defs import topic_brief

TOPIC_ASSETS = [topic_brief, baseline_results]
# in the order of assets/shared/stages.py: round_reference first (the code the round edits), best_code last
ROUND_ASSETS = [round_reference, papers, paper_rankings, ideas, filtered_ideas, experiment_plans, patched_code,
                run_results, feedback_summary, best_code]
ALL_ASSETS = TOPIC_ASSETS + ROUND_ASSETS
