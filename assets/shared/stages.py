"""The stages' asset names in their order, for code that needs the names and not the asset
definitions (assets/__init__.py holds the definitions and imports every stage; a stage that
imported it would import itself). tests/project/test_docs.py checks these against the definitions."""

TOPIC_STAGES = ("topic_brief", "baseline_results")
# round_reference first (the code the round edits), best_code last (the best after it: stacked wins)
ROUND_STAGES = ("round_reference", "papers", "paper_rankings", "ideas", "filtered_ideas", "experiment_plans",
                "patched_code", "run_results", "feedback_summary", "best_code")
