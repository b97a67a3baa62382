"""A whole round of a task whose only caller of the edited function is its evaluator (the
prisoner's dilemma development task, bench/tasks/ipd_strategy): the patch that changes how
`next_move` decides is live code and runs to a metric the scorer recomputes with each run's
seed; a patch that renames the function the evaluator imports is refused before any run."""
import re
import shutil

import dagster as dg
import pytest

from assets import ALL_ASSETS, ROUND_ASSETS, TOPIC_ASSETS
from assets.shared.partitions import multi_key
from resources.store import Store
from schemas.frames import from_frame
from schemas.records import Feedback, Patch, RunResult
from tests.support.fake_llm import FENCE, FakeLLMServer, Script
from tests.support.paths import REPO
from tests.support.resources import make_resources

TOPIC = "ipd_strategy"
FORGIVING = '''def next_move(history):
    """Tit for tat that forgives a lone defection (noise flips one move in twenty)."""
    if len(history) < 2:
        return "C"
    if history[-1][1] == "D" and history[-2][1] == "D":
        return "D"
    return "C"
'''


class StrategyScript(Script):
    """The fake model on the strategy task: the first idea is implemented as a forgiving tit for
    tat, the second renames the function the evaluator calls, the third stays malformed."""

    def answer(self, req: dict) -> str:
        user = req["messages"][-1]["content"]
        if "Implement this idea" in user:
            code = next((h.group(1) for m in req["messages"] if (h := FENCE.search(m["content"]))), "")
            doc = code.split('"""', 2)
            head = f'"""{doc[1]}"""\n\n\n' if len(doc) == 3 else ""
            if "Reverse the gradient" in user:
                return "```python\n" + head + FORGIVING + "```"
            if "more epochs" in user:
                renamed = re.sub(r"def next_move\(", "def choose_move(", code)
                return "```python\n" + renamed.replace("return history[-1][1]", 'return "C"') + "```"
        return super().answer(req)


@pytest.fixture
def strategy_home(home):
    shutil.copytree(REPO / "bench" / "tasks" / TOPIC, home / "experiments" / TOPIC)
    return home


@pytest.mark.slow
def test_a_round_of_a_task_only_its_evaluator_calls(strategy_home):
    with FakeLLMServer(StrategyScript()) as llm:
        instance = dg.DagsterInstance.ephemeral()
        resources = make_resources(llm.base_url)
        instance.add_dynamic_partitions("topics", [TOPIC])
        assert dg.materialize(ALL_ASSETS, selection=TOPIC_ASSETS, partition_key=TOPIC, instance=instance,
                              resources=resources).success
        instance.add_dynamic_partitions("rounds", ["r1"])
        assert dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key(TOPIC, "r1")),
                              instance=instance, resources=resources).success

    store = Store()
    patches = {p.idea_id.split("/")[-1]: p for p in from_frame(store.read("patched_code", TOPIC, "r1"), Patch)}
    forgiving, renamed = patches["negative_step_r1"], patches["longer_training_r1"]
    assert forgiving.status == "ok" and 'history[-2][1] == "D"' in forgiving.diff  # live code, not dead
    assert renamed.status == "not_applied" and "next_move" in (renamed.reason or "")

    runs = {r.idea_id.split("/")[-1]: r for r in from_frame(store.read("run_results", TOPIC, "r1"), RunResult)}
    assert runs["negative_step_r1"].status == "success" and 0 < runs["negative_step_r1"].metric_value <= 5
    assert "longer_training_r1" not in runs or runs["longer_training_r1"].n_attempts == 0  # no run spent on it
    fb = {f.name: f for f in from_frame(store.read("feedback_summary", TOPIC, "r1"), Feedback)}
    assert fb["negative_step_r1"].verdict in ("improvement", "maintenance", "decline")
    assert fb["longer_training_r1"].verdict == "failed"
