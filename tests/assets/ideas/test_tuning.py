"""The `tuning` idea source (assets/ideas/tuning/): which literals are knobs, the moves and
their order over rounds, applying a move, and the move as an idea through the filters, the plan
and the patch without the LLM; a whole round with sources [ranking, tuning] on the toy topic."""
from __future__ import annotations

import dagster as dg
import pytest

from assets.experiment_plans.planning import make_plan
from assets.filtered_ideas.filtering import TUNING_KEPT, keep_tuning
from assets.ideas.generation import History, tuning_ideas
from assets.ideas.tuning import apply_move, find_knobs, moves, propose
from assets.patched_code.patching import mechanical_draft
from schemas.topic import load_topic
from tests.support.topics import VALID, make_topic

SCRIPT = '''import argparse
from dataclasses import dataclass
import torch.nn as nn
from sklearn.linear_model import LogisticRegression

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--test_size", type=float, default=0.2)
args = p.parse_args()

EPOCHS = 4  # passes over the data (état: court)
HIDDEN = 64
VERBOSE = True
if args.seed:
    EPOCHS = 1
n_epochs, batch_size, n_train = 10, 32, 5000


class Net(nn.Module):
    def __init__(self, n_layers=2):
        super().__init__()
        self.drop = nn.Dropout(0.3)
        self.conv = nn.Conv2d(in_channels=1, out_channels=HIDDEN, kernel_size=3)


@dataclass
class Config:
    weight_decay: float = 0.0
    name: str = "run"


PARAMS = {"learning_rate": 0.1, "num_leaves": 31, "objective": "binary", "seed": 7}


def fit(x, y, seed=0):
    clf = LogisticRegression(C=1, max_iter=200, random_state=seed)
    return clf.fit(x, y).predict_proba(x).sum(dim=1) * args.lr * EPOCHS * n_epochs * batch_size
'''


def knobs_by_key(code=SCRIPT):
    return {k.key: k for k in find_knobs(code)}


def test_knobs_are_named_hyper_parameters_only():
    k = knobs_by_key()
    assert set(k) == {"--lr", "EPOCHS", "HIDDEN", "n_epochs", "batch_size", "__init__(n_layers=)", "Dropout()",
                      "LogisticRegression(C=)", "LogisticRegression(max_iter=)", '["learning_rate"]',
                      '["num_leaves"]', "Config.weight_decay"}
    assert k["Config.weight_decay"].where == "the field weight_decay of class Config (line 29)"
    assert moves(k["Config.weight_decay"]) == [("up", 0.0001), ("up", 0.001)]  # from none: a first amount
    assert (k['["learning_rate"]'].kind, k['["num_leaves"]'].kind) == ("learning_rate", "width")
    assert (k["--lr"].kind, k["--lr"].value) == ("learning_rate", 1e-3)
    assert (k["EPOCHS"].kind, k["EPOCHS"].value, k["EPOCHS"].line) == ("training_length", 4, 12)  # not the `if`'s 1
    assert k["n_epochs"].kind == "training_length" and k["batch_size"].kind == "batch_size"  # tuple assignment
    assert k["Dropout()"].kind == "dropout" and k["Dropout()"].value == 0.3
    assert k["__init__(n_layers=)"].kind == "depth" and k["__init__(n_layers=)"].function == "Net"
    assert k["LogisticRegression(C=)"].kind == "penalty" and k["LogisticRegression(C=)"].function == "fit"
    assert k["HIDDEN"].where == "the top-level constant HIDDEN (line 13)"
    # never: seeds, splits, data sizes, flags, in_channels, dim=1, kernel sizes
    assert find_knobs("def f(:\n") == []


def test_moves_step_by_kind_and_leave_out_no_change():
    k = knobs_by_key()
    assert moves(k["EPOCHS"]) == [("up", 8), ("down", 2)]  # shorter once longer did not help (over-fitting)
    assert moves(knobs_by_key("EPOCHS = 1\n")["EPOCHS"]) == [("up", 2)]
    assert moves(k["--lr"]) == [("up", 0.003), ("down", 0.000333)]
    assert moves(k["HIDDEN"]) == [("up", 128), ("down", 32)]
    assert moves(k["Dropout()"]) == [("up", 0.5), ("down", 0.1)]
    assert moves(k["batch_size"]) == [("down", 16), ("up", 64)]
    assert moves(k["LogisticRegression(C=)"]) == [("up", 3.0), ("down", 0.333)]  # an int C moves as a float
    assert moves(k["__init__(n_layers=)"]) == [("up", 3), ("down", 1)]
    one = knobs_by_key("n_layers = 1\n")["n_layers"]
    assert moves(one) == [("up", 2)]  # one layer fewer would be the same value


def test_apply_move_changes_only_that_literal_even_after_non_ascii_text():
    code = "X = 1  # é\nEPOCHS = 4  # passes (état: court)\nX = 'é'; LR = 5e-3; WD = 0.0\n"
    (lr, _), = [(m, w) for m, w in propose(code, [], 5) if m.key == "LR"]
    new = apply_move(code, lr)
    assert new == "X = 1  # é\nEPOCHS = 4  # passes (état: court)\nX = 'é'; LR = 0.015; WD = 0.0\n"
    (ep, _), = [(m, w) for m, w in propose(code, [], 5) if m.key == "EPOCHS"]
    assert apply_move(code, ep).splitlines()[1] == "EPOCHS = 8  # passes (état: court)"
    with pytest.raises(ValueError, match="not in the code at 5e-3"):
        apply_move(code.replace("5e-3", "1e-2"), lr)  # the code moved on since the move was proposed


def test_first_round_takes_one_move_per_knob_by_kind():
    got = [(m.key, m.new_text, why) for m, why in propose(SCRIPT, [], 4)]
    assert got == [("EPOCHS", "8", "first move on this knob"), ("n_epochs", "20", "first move on this knob"),
                   ("LogisticRegression(max_iter=)", "400", "first move on this knob"),
                   ("--lr", "0.003", "first move on this knob")]


def test_an_improving_move_continues_and_no_value_comes_back():
    code1 = "LR = 0.01\nEPOCHS = 5\n"
    (m1, _), = propose(code1, [], 1)
    assert (m1.key, m1.new_text) == ("EPOCHS", "10")
    # it improved and became the reference: the next round doubles again, first
    code2 = apply_move(code1, m1)
    (m2, why), = propose(code2, [("tune_epochs_up", m1, "improvement")], 1)
    assert (m2.key, m2.new_text) == ("EPOCHS", "20") and why.startswith("continues tune_epochs_up")
    # that one declined (the reference stays at 10): no move of EPOCHS is left (5 and 20 were had), the rate is next
    tried = [("tune_epochs_up", m1, "improvement"), ("tune_epochs_up_2", m2, "decline")]
    got = [(m.key, m.direction, m.new_text) for m, _ in propose(code2, tried, 3)]
    assert got == [("LR", "up", "0.03")]
    # a declined rate move is followed by the other direction, saying what was tried
    (m3, _), = propose(code2, tried, 1)
    tried.append(("tune_lr_up", m3, "decline"))
    (m4, why4), = propose(code2, tried, 1)
    assert (m4.key, m4.direction, m4.new_text) == ("LR", "down", "0.00333")
    assert why4 == "the other direction of tune_lr_up (0.01 -> 0.03 declined: the metric is sensitive to this knob)"


def test_a_declined_knob_tries_its_other_direction_before_untried_knobs_a_flat_one_after():
    code = "EPOCHS = 4\nLR = 5e-3\nDROPOUT = 0.3\nEMBED_DIM = 64\n"
    first = {m.key: m for m, _ in propose(code, [], 4)}
    assert (first["EPOCHS"].new_text, first["LR"].new_text) == ("8", "0.015")
    # longer training and a faster rate both made the metric significantly worse; the width did not change it
    tried = [("tune_epochs_up", first["EPOCHS"], "decline"), ("tune_lr_up", first["LR"], "decline"),
             ("tune_embed_dim_up", first["EMBED_DIM"], "maintenance")]
    got = [(m.key, m.direction, m.new_text, why.split(" (")[0]) for m, why in propose(code, tried, 4)]
    assert got == [("EPOCHS", "down", "2", "the other direction of tune_epochs_up"),
                   ("LR", "down", "0.00167", "the other direction of tune_lr_up"),
                   ("DROPOUT", "up", "0.5", "first move on this knob"),
                   ("EMBED_DIM", "down", "32", "earlier moves on this knob: 128")]
    # a failed move (the run crashed) says nothing about the metric: its knob waits like a flat one
    tried[1] = ("tune_lr_up", first["LR"], "failed")
    got = [m.key for m, _ in propose(code, tried, 4)]
    assert got == ["EPOCHS", "DROPOUT", "LR", "EMBED_DIM"]


def test_tuning_ideas_name_the_move_and_build_on_the_improvement():
    code1 = "EPOCHS = 5\n"
    h = History()
    (i1,) = tuning_ideas(code1, h, 2, "t", "r1", set())
    assert (i1.name, i1.source, i1.title) == ("tune_epochs_up", "tuning", "Tune EPOCHS: 5 -> 10")
    assert "from 5 to 10" in i1.experiment and i1.builds_on_ideas == []
    h.ids["tune_epochs_up"] = i1.idea_id
    h.moves.append(("tune_epochs_up", i1.tuning, "improvement"))
    (i2,) = tuning_ideas(apply_move(code1, i1.tuning), h, 2, "t", "r2", {"tune_epochs_up"})
    assert i2.name == "tune_epochs_up_2" and i2.builds_on_ideas == [i1.idea_id] and i2.tuning.new == 20


def test_moves_bypass_the_filters_within_the_budget():
    ideas = tuning_ideas(SCRIPT, History(), 3, "t", "r1", set())
    kept, rest = keep_tuning(ideas, 2)
    assert rest == [] and [k.kept for k in kept] == [True, True, False]
    assert kept[0].novelty_reason == TUNING_KEPT and kept[0].independent
    assert kept[2].drop_reason.startswith("over the round's budget")


def test_reserve_moves_fill_the_places_the_filters_left_empty():
    """The tuning source proposes up to the budget (one per knob); the first `tuning_moves` take
    their places first, the rest wait: a round whose LLM ideas were all dropped (repeats) and
    whose refills brought none still tests its budget, with the next moves."""
    from assets.filtered_ideas.filtering import RESERVE_KEPT, RESERVE_UNUSED, fill_with_moves, split_reserve
    from schemas.records import Idea

    ideas = tuning_ideas(SCRIPT, History(), 3, "t", "r1", set())
    llm = Idea(idea_id="t/r1/bigrams", topic="t", round="r1", name="bigrams", title="Bigrams", experiment="x",
               summary="x")
    items, reserve = split_reserve([ideas[0], llm, *ideas[1:]], first=1)
    assert items == [ideas[0], llm] and reserve == ideas[1:]
    assert len({m.tuning.key for m in ideas}) == 3                           # one move per knob
    short = fill_with_moves(reserve, 2)                                      # no LLM idea survived
    assert [(m.kept, m.novelty_reason) for m in short] == [(True, RESERVE_KEPT), (True, RESERVE_KEPT)]
    full = fill_with_moves(reserve, 0)                                       # the LLM's ideas filled the round
    assert [m.kept for m in full] == [False, False] and full[0].drop_reason == RESERVE_UNUSED
    assert [m.kept for m in fill_with_moves(reserve, 1)] == [True, False]


SKLEARN = """from sklearn.linear_model import Ridge
from sklearn.model_selection import cross_val_score

ALPHAS = [0.1, 1.0, 10.0]
scores = {a: cross_val_score(Ridge(alpha=a), X, y).mean() for a in ALPHAS}
model = Ridge(alpha=max(scores, key=scores.get)).fit(X, y)
"""


def test_a_swap_renames_every_call_of_the_member_and_imports_the_sibling():
    """find_swaps: one knob per family when every call calls the same member; its choices are the
    siblings that take the calls' arguments (LinearRegression takes no alpha), later ones first;
    apply_move renames every call and imports the new name beside the old one."""
    from assets.ideas.tuning import find_knobs, move_of, moves

    (knob,) = find_knobs(SKLEARN)
    assert (knob.key, knob.kind, knob.text, len(knob.sites)) == ("linear_model()", "swap", "Ridge", 2)
    assert [move_of(knob, d, v).new_text for d, v in moves(knob)] == ["Lasso", "ElasticNet", "HuberRegressor"]
    new = apply_move(SKLEARN, move_of(knob, *moves(knob)[2]))
    assert "from sklearn.linear_model import HuberRegressor\n" in new and "Ridge(" not in new
    assert new.count("HuberRegressor(alpha=") == 2 and new.replace("HuberRegressor", "Ridge").replace(
        "from sklearn.linear_model import Ridge\n", "", 1) == SKLEARN
    after, implicit = find_knobs(new)  # Huber's max_iter is unwritten in both calls: a library default
    assert (implicit.key, implicit.implicit, implicit.value) == ("HuberRegressor(max_iter=)", True, 100)
    assert after.text == "HuberRegressor" and [move_of(after, d, v).new_text for d, v in moves(after)] == \
        ["Ridge", "Lasso", "ElasticNet"]  # none after Huber: the earlier members, in order


def test_swaps_of_attributes_respect_each_siblings_arguments():
    from assets.ideas.tuning import find_swaps, move_of, moves

    code = ("import torch\nfrom torch import nn\n\nact = nn.ReLU(inplace=True)\nhead = nn.ReLU()\n"
            "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n")
    by = {k.key: k for k in find_swaps(code)}
    assert [move_of(by["activation_module()"], d, v).new_text for d, v in moves(by["activation_module()"])] == \
        ["SiLU"]  # GELU takes no inplace=
    new = apply_move(code, move_of(by["adam()"], *moves(by["adam()"])[0]))
    assert "torch.optim.AdamW(model.parameters(), lr=1e-3)" in new and new.count("import") == 2
    # two members of one family: which to swap is unclear
    mixed = SKLEARN.replace("import Ridge", "import Lasso, Ridge") + "other = Lasso(alpha=1.0)\n"
    assert find_swaps(mixed) == []
    assert find_swaps("from mylib import Ridge as R\nm = Ridge(alpha=1.0)\n") == []  # Ridge is not that name
    assert find_swaps("def Ridge(**k):\n    pass\nm = Ridge(alpha=1.0)\n") == []  # a local function


def test_swaps_come_after_the_numeric_knobs_and_are_not_repeated():
    from assets.ideas.generation import tunes

    code = SKLEARN + "EPOCHS = 4\n"
    first = propose(code, [], 2)
    assert [m.key for m, _ in first] == ["EPOCHS", "linear_model()"]
    swap = first[1][0]
    later = propose(apply_move(code, swap), [("swap_lasso", swap, "maintenance")], 3)
    assert all(m.new_text not in ("Ridge", "Lasso") for m, _ in later if m.key == "linear_model()")
    ideas = tuning_ideas(code, History(), 2, "t", "r1", set())
    assert ideas[1].name == "swap_lasso" and ideas[1].title == "Swap linear model: Ridge -> Lasso"
    # places left after one move per knob go to the swap's other members (alternatives, not a line search)
    assert [m.new_text for m, _ in propose(code, [], 4)] == ["8", "Lasso", "ElasticNet", "HuberRegressor"]
    assert [m.new_text for m, _ in propose(code, [("swap_lasso", swap, "maintenance")], 4)] == \
        ["8", "ElasticNet", "HuberRegressor"]
    assert not tunes(["ranking", "tuning"], SKLEARN)  # a swap is not a value the LLM must leave alone


def _fb(idea_id: str, verdict: str):
    from schemas.records import Feedback
    return Feedback(idea_id=idea_id, name=idea_id, title="", summary="", verdict=verdict, reason="",
                    metric_value=None, baseline_value=0.8, effective=verdict == "improvement")


def test_places_for_moves_follow_each_kinds_record_in_the_topic():
    """tuning_places: the first round (no verdicts) and `tuning_adapt: false` give tuning_moves; later
    rounds share the budget by each kind's rate of verified improvements with one prior win and loss
    ((w + 1) / (n + 2)), never below tuning_moves, one place left for the LLM's ideas."""
    from assets.ideas.tuning import tuning_places

    moves = {"m1", "m2", "m3"}
    first = tuning_places([], moves, 1, 3, adapt=True, llm_sources=True)
    assert first.moves == 1 and "no earlier verdicts" in first.reason
    won = [_fb("m1", "improvement"), _fb("a", "failed"), _fb("b", "maintenance")]  # 2/3 vs 1/4: 0.73 of 3
    assert tuning_places(won, moves, 1, 3, adapt=True, llm_sources=True).moves == 2
    assert tuning_places(won, moves, 1, 3, adapt=False, llm_sources=True).moves == 1
    assert tuning_places(won, moves, 1, 6, adapt=True, llm_sources=True).moves == 4   # 4.4 of 6
    assert tuning_places(won, moves, 1, 3, adapt=True, llm_sources=False).moves == 2  # round(2.18)
    # the LLM's ideas winning take the places back, down to tuning_moves and no lower
    llm_won = [_fb("m1", "decline"), _fb("m2", "maintenance"), _fb("a", "improvement"), _fb("b", "improvement")]
    assert tuning_places(llm_won, moves, 1, 3, adapt=True, llm_sources=True).moves == 1
    assert tuning_places(llm_won, moves, 1, 6, adapt=True, llm_sources=True).moves == 2  # 0.25 of 6, half up
    # neither kind has won: even rates, but a kind run less is not punished for it
    even = tuning_places([_fb("m1", "decline"), _fb("a", "failed"), _fb("b", "failed")], moves, 1, 3,
                         adapt=True, llm_sources=True)
    assert even.moves == 2 and "moves improved 0/1, the LLM's ideas 0/2" in even.reason
    # every place but the LLM's one is already the user's
    assert tuning_places(won, moves, 2, 3, adapt=True, llm_sources=True).moves == 2


@pytest.fixture
def spec(tmp_path):
    return load_topic(make_topic(tmp_path, "toy", {**VALID}))


def test_plan_and_patch_of_a_move_ask_no_llm(spec):
    code = "import json\nEPOCHS = 5\nHIDDEN = 8\njson.dump({'accuracy': EPOCHS / 10}, open('final_info.json', 'w'))\n"
    ideas = {i.tuning.key: i for i in tuning_ideas(code, History(), 2, "t", "r1", set())}
    kept, _ = keep_tuning(list(ideas.values()), 3)
    by_key = {k.tuning.key: k for k in kept}
    plan = make_plan(spec, code, by_key["EPOCHS"], llm=None)  # None: any LLM call would fail
    assert plan.functions == ["<module>"] and plan.changes == [by_key["EPOCHS"].experiment]
    d = mechanical_draft(spec, code, by_key["EPOCHS"], "functions")
    assert d.status == "ok" and "-EPOCHS = 5\n+EPOCHS = 10" in d.diff
    assert d.edit_format == "functions"  # the format its LLM repairs are asked in
    # a knob nothing reads is not an implementation
    dead = mechanical_draft(spec, code, by_key["HIDDEN"], "functions")
    assert dead.status == "no_op", dead.reason
    # the code changed since: recorded, not raised
    gone = mechanical_draft(spec, code.replace("EPOCHS = 5", "EPOCHS = 7"), by_key["EPOCHS"], "functions")
    assert gone.status == "not_applied" and "not in the code at 5" in gone.reason


def test_an_idea_applying_a_card_at_a_named_place_is_planned_without_the_llm(spec):
    from schemas.records import FilteredIdea

    code = ("import torch.nn as nn\nEPOCHS = 5\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
            "def train(model):\n    pass\n")
    idea = FilteredIdea(idea_id="t/r1/drop", topic="t", round="r1", name="drop", title="Dropout",
                        experiment="Add dropout before the head.", summary="s", max_similarity=0.0,
                        independent=True, kept=True, method_card="srivastava2014dropout",
                        code_place="the forward method of Net")
    plan = make_plan(spec, code, idea, llm=None)  # None: any LLM call would fail
    assert plan.functions == ["Net"] and plan.changes == ["Add dropout before the head."]
    assert plan.location == "the forward method of Net" and "srivastava2014dropout" in plan.expected_effect
    # a place that names a call the file makes: the part that holds it
    called = idea.model_copy(update={"code_place": "make_pipeline"})
    piped = code + "def build():\n    return make_pipeline(StandardScaler(), Ridge())\n"
    assert make_plan(spec, piped, called, llm=None).functions == ["build"]
    # a place that names no part of the file, or an idea without a card: the LLM plans it
    for other in (idea.model_copy(update={"code_place": "somewhere sensible"}),
                  idea.model_copy(update={"method_card": None})):
        with pytest.raises(AttributeError):
            make_plan(spec, code, other, llm=None)


def test_sources_accept_tuning(tmp_path):
    spec = load_topic(make_topic(tmp_path, "toy", {**VALID, "ideation": {"sources": ["ranking", "tuning"],
                                                                         "tuning_moves": 2}}))
    assert spec.ideation.sources == ["ranking", "tuning"] and spec.ideation.tuning_moves == 2


def test_a_round_with_the_tuning_source(home, fake_llm):
    """The toy round with sources [ranking, tuning]: the move is kept without the filters and
    takes one of the 3 places, the LLM's ideas the other two; the move's patch and run need no
    LLM call and its run records the new value's metric."""
    from assets import ALL_ASSETS, ROUND_ASSETS
    from assets.shared.partitions import multi_key
    from resources.store import Store
    from schemas.frames import from_frame
    from schemas.records import FilteredIdea, Patch, RunResult
    from tests.support.ideation import set_ideation
    from tests.support.resources import make_resources
    from tests.support.rounds import materialize_topic

    set_ideation(home, sources=["ranking", "tuning"])
    instance = dg.DagsterInstance.ephemeral()
    resources = make_resources(fake_llm.base_url)
    materialize_topic(instance, resources)
    instance.add_dynamic_partitions("rounds", ["r1"])
    res = dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key("toy_classification", "r1")),
                         instance=instance, resources=resources)
    assert res.success
    store = Store()
    filtered = from_frame(store.read("filtered_ideas", "toy_classification", "r1"), FilteredIdea)
    kept = [f for f in filtered if f.kept]
    assert len(kept) == 3 and [f.source for f in kept].count("tuning") == 1
    move = next(f for f in kept if f.source == "tuning")
    assert move.name == "tune_epochs_up" and move.tuning.new == 60
    patch = next(p for p in from_frame(store.read("patched_code", "toy_classification", "r1"), Patch)
                 if p.idea_id == move.idea_id)
    assert patch.status == "ok" and "+EPOCHS = 60" in patch.diff and patch.drafts[0].how.startswith("tuning move")
    run = next(r for r in from_frame(store.read("run_results", "toy_classification", "r1"), RunResult)
               if r.idea_id == move.idea_id)
    assert run.status == "success" and run.metric_value is not None
    meta = instance.get_latest_materialization_event(dg.AssetKey("filtered_ideas")).asset_materialization.metadata
    assert meta["tuning_moves_kept"].value == 1 and meta["reserve_moves_kept"].value == 0
    # the reserve move (the LR knob) waited: the LLM's ideas filled the round, so it is recorded as not needed
    from assets.filtered_ideas.filtering import RESERVE_UNUSED
    assert [(f.name, f.drop_reason) for f in filtered if f.source == "tuning" and not f.kept] == \
        [("tune_lr_up", RESERVE_UNUSED)]
    assert meta["tuning_places"].value == 1 and "no earlier verdicts" in meta["tuning_places_reason"].value
    # round 2: the moves' places follow r1's verdicts (ideation.tuning_adapt, the default)
    from assets.ideas.generation import read_history
    from assets.ideas.tuning import tuning_places
    from schemas.records import Feedback
    instance.add_dynamic_partitions("rounds", ["r2"])
    assert dg.materialize(ALL_ASSETS, selection=ROUND_ASSETS, partition_key=str(multi_key("toy_classification", "r2")),
                          instance=instance, resources=resources).success
    h = read_history(store, "toy_classification", "r2")
    r1 = from_frame(store.read("feedback_summary", "toy_classification", "r1"), Feedback)
    assert len(r1) == 3 and {f.idea_id for f in r1} & h.tuning_ids == {move.idea_id}
    want = tuning_places(r1, h.tuning_ids, 1, 3, adapt=True, llm_sources=True)
    meta = instance.get_latest_materialization_event(dg.AssetKey("filtered_ideas")).asset_materialization.metadata
    assert meta["tuning_places"].value == want.moves and meta["tuning_places_reason"].value == want.reason
    assert "moves improved" in want.reason
    kept2 = [f for f in from_frame(store.read("filtered_ideas", "toy_classification", "r2"), FilteredIdea) if f.kept]
    assert [f.source for f in kept2].count("tuning") >= want.moves


def test_with_the_tuning_source_the_llm_is_told_to_leave_values_to_the_moves():
    from assets.ideas import prompts

    head = ("T", "d", "accuracy", "maximize", "EPOCHS = 3\n")
    for tuned in (False, True):
        asks = [prompts.generate(*head, [], ["a: A (maintenance)"], [], 2, tuned=tuned),
                prompts.brainstorm(*head, [], [], 2, tuned=tuned),
                prompts.scipip(*head, [], [], [], 2, tuned=tuned),
                prompts.refill(*head, [], [], [], 2, ["k: K"], ["d: D (dropped: repeats)"], tuned=tuned)]
        assert all((prompts.TUNED in m[-1]["content"]) is tuned for m in asks)


def test_moves_are_not_shown_to_the_llm_as_ideas_to_build_on():
    from schemas.records import Feedback

    def fb(idea_id, effective):
        return Feedback(idea_id=idea_id, name=idea_id, title=idea_id, summary="", verdict="improvement" if effective
                        else "decline", reason="", metric_value=0.9, baseline_value=0.8, effective=effective)

    h = History(feedback=[fb("t/r1/tune_epochs_up", True), fb("t/r1/bigrams", True), fb("t/r1/x", False)],
                tuning_ids={"t/r1/tune_epochs_up"})
    assert [f.idea_id for f in h.effective] == ["t/r1/bigrams"]


def test_read_history_keeps_moves_apart_from_the_ideas_the_llm_sees(tmp_path):
    from assets.ideas.generation import read_history
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import Feedback, FilteredIdea, Idea

    code = "EPOCHS = 5\nLR = 0.1\n"
    moves_ = tuning_ideas(code, History(), 2, "t", "r1", set())
    llm_idea = Idea(idea_id="t/r1/bigrams", topic="t", round="r1", name="bigrams", title="Bigrams", experiment="x",
                    summary="x")
    kept, _ = keep_tuning(moves_, 1)  # the second move over the budget: not kept
    fi = kept + [FilteredIdea(**llm_idea.model_dump(), max_similarity=0.0, independent=True, kept=True)]
    store = Store(tmp_path)
    store.write(to_frame(fi, FilteredIdea), "filtered_ideas", "t", "r1")
    verdict = {"t/r1/tune_epochs_up": "improvement", "t/r1/bigrams": "decline"}
    store.write(to_frame([Feedback(idea_id=i, name=i.split("/")[-1], title="", summary="", verdict=v, reason="",
                                   metric_value=0.9, baseline_value=0.8, effective=v == "improvement")
                          for i, v in verdict.items()], Feedback), "feedback_summary", "t", "r1")
    h = read_history(store, "t", "r2")
    assert h.tried == ["bigrams: Bigrams (decline)"]  # the moves are not ideas for the LLM to copy
    assert [(n, m.key, v) for n, m, v in h.moves] == [("tune_epochs_up", "EPOCHS", "improvement")]
    assert h.tuning_ids == {"t/r1/tune_epochs_up", "t/r1/tune_lr_up"} and h.effective == []
    assert {f.idea_id for f in h.bank(("improvement", "decline"))} == set(verdict)  # the filters still see both


def test_the_llm_is_told_so_only_when_there_is_a_knob_to_move():
    from assets.ideas.generation import tunes

    assert tunes(["ranking", "tuning"], "EPOCHS = 3\n")
    assert not tunes(["ranking"], "EPOCHS = 3\n")
    assert not tunes(["ranking", "tuning"], "ALPHAS = [0.1, 1.0]\nFOLDS = 5\n")  # no named knob: no move


def test_a_form_feed_in_the_code_does_not_shift_the_knob_lines():
    """Python numbers lines at \\n, \\r\\n and \\r only; str.splitlines also splits at a form feed
    (page breaks in old sources), which would put a knob's edit on the wrong line."""
    code = "import json\n# part one\x0c\nEPOCHS = 3\r\nLR = 0.1\njson.dump({'a': EPOCHS * LR}, open('f', 'w'))\n"
    moved = {m.key: m for m, _ in propose(code, [], 2)}
    new = apply_move(code, moved["EPOCHS"])
    assert "EPOCHS = 6\r\n" in new and new.replace("EPOCHS = 6", "EPOCHS = 3") == code


def test_library_defaults_a_call_leaves_unwritten_are_knobs_written_in_by_a_move():
    """find_defaults: a known callee's unwritten keyword is a knob at the library's default; a move
    writes it into the call (after the arguments, or alone), and the next round finds it as a written
    literal under the same key, so the line search and the no-repeat rule carry on."""
    from assets.ideas.generation import tunes
    from assets.ideas.tuning import move_of

    code = "from sklearn.ensemble import RandomForestRegressor\nm = RandomForestRegressor()\n"
    swap, knob = find_knobs(code)  # the forest family's swap to ExtraTreesRegressor, and the default
    assert swap.kind == "swap"
    assert (knob.key, knob.kind, knob.value, knob.implicit) == ("RandomForestRegressor(n_estimators=)",
                                                                "training_length", 100, True)
    assert "not written: the library default 100" in knob.where
    (_, _), (move, why) = propose(code, [], 3)  # the written code's swap first
    assert move.new_text == "200" and "library default" in why
    new = apply_move(code, move)
    assert new == code.replace("RandomForestRegressor()", "RandomForestRegressor(n_estimators=200)")
    _, after = find_knobs(new)
    assert (after.key, after.value, after.implicit) == (knob.key, 200, False)
    assert [m.new_text for m, _ in propose(new, [("tune_n", move, "improvement")], 1)] == ["400"]  # continues
    assert not tunes(["ranking", "tuning"], code)  # nothing written to leave alone: the LLM may change values

    # torch: after the positional parameters and the written keywords; a non-literal lr is written, not a default
    torch_code = "import torch\nopt = torch.optim.Adam(model.parameters(), lr=LR)\n"
    _, wd = find_knobs(torch_code)  # the adam() swap, then the default
    assert (wd.key, wd.value) == ("Adam(weight_decay=)", 0.0)
    assert apply_move(torch_code, move_of(wd, "up", 1e-4)).endswith(
        "torch.optim.Adam(model.parameters(), lr=LR, weight_decay=0.0001)\n")
    # never: a local function of that name, **kwargs, more positional arguments than the callee takes
    assert find_knobs("def Ridge():\n    pass\nm = Ridge()\n") == []
    assert find_knobs("from sklearn.linear_model import Ridge\nm = Ridge(**params)\n") == []
    assert find_knobs("from sklearn.linear_model import Ridge\nm = Ridge(0.5)\n") == []


def test_a_keyword_in_several_calls_is_one_knob_and_moves_in_every_call():
    """A cross-validation and the final fit calling the same estimator: one knob, so a move cannot
    leave the two disagreeing; written with different values they stay separate knobs."""
    same = ("from sklearn.linear_model import HuberRegressor\ncv = HuberRegressor(alpha=a)\n"
            "model = HuberRegressor(alpha=b).fit(x, y)\n")
    (knob,) = [k for k in find_knobs(same) if k.key == "HuberRegressor(max_iter=)"]
    assert len(knob.sites) == 2 and "2 calls" in knob.where
    (move, _), = [(m, w) for m, w in propose(same, [], 5) if m.key == knob.key]
    new = apply_move(same, move)
    assert new.count("max_iter=200") == 2
    (written,) = [k for k in find_knobs(new) if k.key == knob.key]
    assert (written.implicit, len(written.sites), written.value) == (False, 2, 200)
    new2 = apply_move(new, [m for m, _ in propose(new, [("tune_it", move, "improvement")], 5) if m.key == knob.key][0])
    assert new2.count("max_iter=400") == 2
    # one call writes it: that literal is the knob, not a default for the other call
    (one_written,) = [k for k in find_knobs(same.replace("alpha=b", "alpha=b, max_iter=50"))
                      if k.key == knob.key]
    assert (one_written.implicit, one_written.value, one_written.sites) == (False, 50, ())
    # written with different values: two knobs
    two = "from sklearn.svm import SVC\na = SVC(C=1.0)\nb = SVC(C=10.0)\n"
    assert {k.key: k.value for k in find_knobs(two)} == {"SVC(C=)": 1.0, "SVC(C=)#2": 10.0}
    one = "from sklearn.svm import SVC\na = SVC(C=1.0)\nb = SVC(C=1.0)\n"
    assert [(k.key, len(k.sites)) for k in find_knobs(one)] == [("SVC(C=)", 2)]


def test_written_knobs_and_swaps_come_before_unwritten_defaults():
    code = ("import torch\nfrom torch import nn\nEPOCHS = 3\nact = nn.ReLU()\n"
            "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n")
    assert [m.key for m, _ in propose(code, [], 5)] == ["EPOCHS", "Adam(lr=)", "activation_module()", "adam()",
                                                       "Adam(weight_decay=)"]


GBR = ("from sklearn.ensemble import GradientBoostingRegressor\n"
       "from sklearn.linear_model import SGDRegressor\n"
       "model = GradientBoostingRegressor(random_state=0)\n"
       "other = SGDRegressor(eta0=0.01)\n")


def test_a_learning_rate_pairs_with_the_training_length_beside_it():
    from assets.ideas.tuning import compensations, partner

    ks = knobs_by_key(GBR)
    rate = ks["GradientBoostingRegressor(learning_rate=)"]
    assert partner(list(ks.values()), rate).key == "GradientBoostingRegressor(n_estimators=)"  # a library default
    assert partner(list(ks.values()), ks["SGDRegressor(eta0=)"]) is None  # no length in its own call
    (pair,) = compensations(GBR)
    assert (pair.new_text, pair.paired.new_text) == ("0.0333", "300")
    assert "GradientBoostingRegressor(random_state=0, learning_rate=0.0333, n_estimators=300)" in apply_move(GBR, pair)
    # constants pair within one top-level definition; a length keyword of some call is not a rate's partner
    code = "LR = 0.01\nEPOCHS = 5\n\n\ndef train(lr=0.1, steps=100):\n    return lr * steps\n"
    got = {(m.key, m.paired.key, m.paired.new_text) for m in compensations(code)}
    assert got == {("LR", "EPOCHS", "15"), ("train(lr=)", "train(steps=)", "300")}
    assert compensations("LR = 0.01\nmodel = fit(max_iter=100)\n") == []


def test_the_compensating_pair_comes_once_a_slower_rate_alone_declined_and_never_twice():
    code = "LR = 0.01\nEPOCHS = 5\n"
    (up_e, _), (up_lr, _) = propose(code, [], 2)
    assert up_lr.paired is None and up_lr.direction == "up"  # no pair before a slower rate has declined
    tried = [("tune_epochs_up", up_e, "maintenance"), ("tune_lr_up", up_lr, "decline")]
    ms = {m.key: m for m, _ in propose(code, tried, 2)}
    assert ms["LR"].direction == "down" and ms["LR"].paired is None  # the decline's other direction comes first
    tried.append(("tune_lr_down", ms["LR"], "decline"))
    (pair, why), *_ = propose(code, tried, 2)
    assert (pair.key, pair.new_text, pair.paired.key, pair.paired.new_text) == ("LR", "0.00333", "EPOCHS", "15")
    assert why.startswith("tune_lr_down (0.01 -> 0.00333 alone) declined")
    # one idea holds both knobs: nothing else moves EPOCHS in that round
    assert [m.key for m, _ in propose(code, tried, 2)] == ["LR"]
    tried.append(("tune_lr_down_epochs_up", pair, "maintenance"))
    assert all(m.paired is None for m, _ in propose(code, tried, 3))  # tried once, not again
    # a pair that improved continues from the code it made while both knobs hold its values
    tried[-1] = ("tune_lr_down_epochs_up", pair, "improvement")
    stacked = apply_move(code, pair)
    (nxt, why), *_ = propose(stacked, tried, 2)
    assert (nxt.new_text, nxt.paired.new_text, why.split(" (")[0]) == ("0.00111", "45", "continues "
                                                                      "tune_lr_down_epochs_up")
    assert all(m.paired is None for m, _ in propose(stacked.replace("EPOCHS = 15", "EPOCHS = 16"), tried, 3))


def test_a_pair_is_one_idea_with_one_plan_and_one_draft(spec):
    from assets.ideas.tuning import compensations

    code = "import json\nLR = 0.01\nEPOCHS = 5\njson.dump({'accuracy': LR * EPOCHS}, open('final_info.json', 'w'))\n"
    (pair,) = compensations(code)
    h = History()
    h.moves += [("tune_lr_up", pair.model_copy(update={"new": 0.03, "new_text": "0.03", "direction": "up",
                                                        "paired": None}), "decline"),
                ("tune_lr_down", pair.model_copy(update={"paired": None}), "decline")]
    (idea,) = tuning_ideas(code, h, 1, "t", "r3", set())
    assert idea.name == "tune_lr_down_epochs_up" and idea.title == "Tune LR: 0.01 -> 0.00333, EPOCHS: 5 -> 15"
    assert "from 0.01 to 0.00333 and the top-level constant EPOCHS (line 3) from 5 to 15" in idea.experiment
    (kept,), _ = keep_tuning([idea], 3)
    assert make_plan(spec, code, kept, llm=None).functions == ["<module>"]
    d = mechanical_draft(spec, code, kept, "functions")
    assert d.status == "ok" and "+LR = 0.00333" in d.diff and "+EPOCHS = 15" in d.diff


def test_scikit_learns_mlp_rate_is_a_learning_rate_and_pairs_with_its_iterations():
    from assets.ideas.tuning import compensations

    code = ("from sklearn.neural_network import MLPRegressor\n"
            "model = MLPRegressor(learning_rate_init=1e-3, random_state=0)\n")
    ks = knobs_by_key(code)
    assert ks["MLPRegressor(learning_rate_init=)"].kind == "learning_rate"
    assert ks["MLPRegressor(max_iter=)"].implicit  # the library default 200
    (pair,) = compensations(code)
    assert "MLPRegressor(learning_rate_init=0.000333, random_state=0, max_iter=600)" in apply_move(code, pair)


def test_knob_changes_read_a_change_of_knob_values_only():
    from assets.ideas.tuning import knob_changes

    code = "from torch.optim import Adam\nLR = 0.1\nopt = Adam(params, lr=LR)\nm = fit(batch_size=200)\n"
    got = knob_changes(code, code.replace("200", "100").replace("0.1", "1e-2"))
    assert [(m.key, m.old_text, m.new_text) for m in got] == [("LR", "0.1", "0.01"), ("fit(batch_size=)", "200", "100")]
    # a swap as the move writes it (the sibling imported beside the old name) is read back as that move
    swapped = code.replace("opt = Adam(", "opt = AdamW(").replace("import Adam\n", "import Adam\nfrom torch.optim "
                                                                  "import AdamW\n")
    assert [(m.kind, m.new_text) for m in knob_changes(code, swapped)] == [("swap", "AdamW")]
    assert knob_changes(code, code) == []
    assert knob_changes(code, code.replace("200", "100") + "print(LR)\n") is None  # anything else changed
    assert knob_changes(code, "def (:\n") is None


def test_a_second_win_of_a_round_is_carried_over_onto_the_best(tmp_path):
    import polars as pl

    from assets.ideas.generation import read_history
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import Feedback, FilteredIdea, Idea

    ref = "LR = 0.001\nmodel = fit(batch_size=200, lr=LR)\n"
    fast, small, other = ref.replace("0.001", "0.01"), ref.replace("200", "100"), ref + "print(LR)\n"
    names = {"faster": fast, "smaller_batch": small, "logging": other, "slower": ref.replace("0.001", "0.0001")}
    verdicts = {"faster": "improvement", "smaller_batch": "improvement", "logging": "improvement",
                "slower": "decline"}
    store = Store(tmp_path)
    fi = [FilteredIdea(**Idea(idea_id=f"t/r1/{n}", topic="t", round="r1", name=n, title=n, experiment="x",
                              summary="x").model_dump(), max_similarity=0.0, independent=True, kept=True)
          for n in names]
    store.write(to_frame(fi, FilteredIdea), "filtered_ideas", "t", "r1")
    store.write(to_frame([Feedback(idea_id=f"t/r1/{n}", name=n, title=n, summary="", verdict=v, reason="",
                                   metric_value=0.9, baseline_value=0.8, effective=v == "improvement")
                          for n, v in verdicts.items()], Feedback), "feedback_summary", "t", "r1")
    store.write(pl.DataFrame({"code": [ref]}), "round_reference", "t", "r1")
    store.write(pl.DataFrame({"idea_id": [f"t/r1/{n}" for n in names], "final_code": list(names.values())}),
                "run_results", "t", "r1")
    h = read_history(store, "t", "r2")
    # the logging win changed more than knobs (it is carried over by a merge), the decline is no win
    assert [(w.name, [m.new_text for m in w.moves or []]) for w in h.wins] == [
        ("faster", ["0.01"]), ("smaller_batch", ["100"]), ("logging", [])]
    # r2's reference is the best win (the faster rate): the other wins are carried over onto it, first,
    # the latest first: the logging change by a merge of lines, the smaller batch as a move
    ideas = tuning_ideas(fast, h, 2, "t", "r2", set())
    assert [i.name for i in ideas] == ["carry_logging", "carry_smaller_batch"]
    merged, moved = ideas
    assert merged.tuning is None and merged.carry.win_id == "t/r1/logging" and merged.source == "tuning"
    assert merged.carry.code == "LR = 0.01\nmodel = fit(batch_size=200, lr=LR)\nprint(LR)\n"
    assert "+print(LR)" in merged.carry.diff and merged.builds_on_ideas == ["t/r1/logging"]
    assert moved.builds_on_ideas == ["t/r1/smaller_batch"]
    assert moved.title == "Carry over smaller_batch: batch_size: 200 -> 100"
    assert apply_move(fast, moved.tuning) == "LR = 0.01\nmodel = fit(batch_size=100, lr=LR)\n"
    assert all(not i.name.startswith("carry_faster") for i in ideas)  # already in the reference
    # with the reference fixed (`reference: baseline`) the wins ran on this very code: nothing to carry
    assert all(not i.name.startswith("carry") for i in tuning_ideas(ref, h, 2, "t", "r2", set()))
    # the plan and the patch of a merged win ask no LLM
    kept, _ = keep_tuning(ideas, 2)
    spec = load_topic(make_topic(tmp_path, "toy", {**VALID}))
    assert make_plan(spec, fast, kept[0], llm=None).functions == ["<module>"]
    d = mechanical_draft(spec, fast, kept[0], "functions")
    assert d.status == "ok" and d.code == merged.carry.code and "+print(LR)" in d.diff
    # once kept in a round, neither is carried again
    store.write(to_frame(kept, FilteredIdea), "filtered_ideas", "t", "r2")
    h3 = read_history(store, "t", "r3")
    assert h3.carried == {"t/r1/logging"} and "carry_smaller_batch" in [n for n, _, _ in h3.moves]
    assert all(not i.name.startswith("carry") for i in tuning_ideas(fast, h3, 2, "t", "r3", set()))
    # a win whose lines a later change rewrote does not merge: it is left out, not guessed
    clash = "LR = 0.001\nmodel = fit(batch_size=200, lr=LR)\nprint(LR * 2)\n"
    assert all(i.name != "carry_logging" for i in tuning_ideas(clash, h, 2, "t", "r2", set()))


def test_a_win_of_three_knob_values_is_carried_over_by_a_merge():
    from assets.ideas.generation import Win
    from assets.ideas.tuning import knob_changes

    ref = "LR = 0.001\nEPOCHS = 10\nHIDDEN = 32\nrun(LR, EPOCHS, HIDDEN)\n"
    win = ref.replace("0.001", "0.003").replace("10", "20").replace("32", "64")
    moves = knob_changes(ref, win)
    assert len(moves) == 3  # too many for one move idea (a move holds at most a pair)
    now = ref + "print('done')\n"  # the next reference: another win's change
    h = History(wins=[Win("three", "t/r1/three", ref, win, moves)])
    [idea] = tuning_ideas(now, h, 1, "t", "r2", set())
    assert idea.tuning is None and idea.carry.code == win + "print('done')\n"


def test_an_llm_idea_that_changed_one_knob_counts_as_that_move(tmp_path):
    """Sentiment, bench r2 -> r3: the LLM's 'larger embeddings' was exactly EMBED_DIM 64 -> 128 (maintenance), and
    the next round's tuning source proposed that same program again. Now the idea is the knob's move in the history."""
    import polars as pl

    from assets.ideas.generation import read_history
    from resources.store import Store
    from schemas.frames import to_frame
    from schemas.records import Feedback, FilteredIdea, Idea

    ref = "EMBED_DIM = 64\nEPOCHS = 4\nmodel = fit(EMBED_DIM, EPOCHS)\n"
    codes = {"bigger_embeddings": ref.replace("64", "128"), "logging": ref + "print(EPOCHS)\n"}
    store = Store(tmp_path)
    store.write(to_frame([FilteredIdea(**Idea(idea_id=f"t/r1/{n}", topic="t", round="r1", name=n, title=n,
                                              experiment="x", summary="x").model_dump(),
                                       max_similarity=0.0, independent=True, kept=True) for n in codes], FilteredIdea),
                "filtered_ideas", "t", "r1")
    store.write(to_frame([Feedback(idea_id=f"t/r1/{n}", name=n, title=n, summary="", verdict="maintenance", reason="",
                                   metric_value=0.75, baseline_value=0.75, effective=False) for n in codes], Feedback),
                "feedback_summary", "t", "r1")
    store.write(pl.DataFrame({"code": [ref]}), "round_reference", "t", "r1")
    store.write(pl.DataFrame({"idea_id": [f"t/r1/{n}" for n in codes], "final_code": list(codes.values())}),
                "run_results", "t", "r1")
    h = read_history(store, "t", "r2")
    assert [(n, m.key, m.new, v) for n, m, v in h.moves] == [("bigger_embeddings", "EMBED_DIM", 128.0, "maintenance")]
    assert h.wins == [] and any(t.startswith("bigger_embeddings") for t in h.tried)  # still shown to the LLM as tried
    proposed = [(m.key, m.new) for m, _ in propose(ref, h.moves, 4)]
    assert ("EMBED_DIM", 128.0) not in proposed and ("EPOCHS", 8.0) in proposed
    # the maintenance sends the knob behind the untouched ones: its other direction comes after EPOCHS' first move
    assert proposed.index(("EPOCHS", 8.0)) < proposed.index(("EMBED_DIM", 32.0))
