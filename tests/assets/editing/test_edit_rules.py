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


def test_a_repair_that_renames_an_entry_point_is_refused_before_a_run(tmp_path):
    from assets.editing.edit_formats import EditError
    from assets.run_results.experimenting import RunTarget
    from assets.run_results.repair_search import repair
    from schemas.records import Attempt

    (tmp_path / "strategy.py").write_text(STRATEGY)
    target = RunTarget(folder=tmp_path, code_file="strategy.py", command=("python", "evaluate.py"), timeout_s=10,
                       metric="payoff", entry_points=("strategy.py:next_move",))
    renamed = "def choose(history):\n    return 'D'\n"

    class OneAnswer:  # the LLM resource's complete(): the parse hook sees the answer, as the server's would
        def complete(self, messages, *, parse, **kw):
            self.prompt = messages[-1]["content"]
            try:
                parse(f"```python\n{renamed}```")
            except EditError as e:
                self.refused = e
            raise AssertionError("stop after the first answer")

    llm = OneAnswer()
    a = Attempt(attempt=1, command=list(target.command), exit_code=1, timed_out=False, duration_s=0.1,
                error="TypeError: bad move", stderr_tail="TypeError: bad move")
    try:
        repair(a, STRATEGY, STRATEGY, target=target, llm=llm, mode="error", edit_format="whole")
    except AssertionError:
        pass
    assert "The task's evaluator calls `next_move`" in llm.prompt
    assert llm.refused.status == "not_applied" and "next_move" in str(llm.refused)
