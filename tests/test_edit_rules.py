from assets.editing.prompts import RULES, rules
from assets.patched_code.prompts import implement

TRAINING = "import argparse\nimport json\n\njson.dump({}, open('out/final_info.json', 'w'))\n"
STRATEGY = "def next_move(history):\n    return 'C'\n"


def test_a_training_script_keeps_the_shared_rules():
    assert rules(TRAINING) == RULES


def test_a_function_the_evaluator_calls_is_named_and_no_training_rules_are_invented():
    said = rules(STRATEGY, ["strategy.py:next_move"])
    assert "`next_move`" in said and "keep their names, parameters" in said
    assert "final_info" not in said and "command-line" not in said and "training" not in said


def test_the_patch_prompt_carries_the_entry_points():
    msgs = implement(STRATEGY, "strategy.py", "whole", "Forgive once", "Cooperate after one defection.",
                     ["return C after a single defection"], entry_points=["strategy.py:next_move"])
    assert "The task's evaluator calls `next_move`" in msgs[1]["content"]
    assert "final_info.json" not in msgs[1]["content"]
