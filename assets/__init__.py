"""One module per stage; thin assets over the pure domain modules next to them."""
from assets.feedback import feedback_summary
from assets.ideation import filtered_ideas, ideas
from assets.papers import paper_rankings, papers
from assets.topic import baseline_results, topic_brief
from assets.verification import experiment_plans, patched_code, run_results

TOPIC_ASSETS = [topic_brief, baseline_results]
ROUND_ASSETS = [papers, paper_rankings, ideas, filtered_ideas, experiment_plans, patched_code, run_results,
                feedback_summary]
ALL_ASSETS = TOPIC_ASSETS + ROUND_ASSETS
