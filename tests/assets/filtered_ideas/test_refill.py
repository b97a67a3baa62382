"""Filling the round with different ideas: when the independence/novelty filters drop ideas and
leave the round short of its budget, more are asked for (at most `ideation.refills` times), the
model told which ideas were dropped and why; the filters themselves are DOLPHIN's, unchanged."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import dagster as dg
import pytest

from assets.filtered_ideas.filtering import dropped_by_filters, fill_round
from assets.ideas.generation import History, propose_more
from resources.store import Store
from schemas.frames import from_frame
from schemas.llm_outputs import IdeaDraft, IdeaList
from schemas.records import FilteredIdea
from schemas.topic import load_topic
from tests.support.fake_llm import Script
from tests.support.ideation import TOPIC, Novelty, embed, fb, idea, seed_round1
from tests.support.topics import VALID, make_topic

BANK = [fb(idea("old_a", "a"), "decline")]  # an earlier ineffective idea; summary "a"


class Proposer:
    """Stands in for the refill call: the ideas it returns per call, and what it was told."""

    def __init__(self, *batches):
        self.batches, self.calls = list(batches), []

    def __call__(self, missing, k, decided):
        self.calls.append((missing, k, [(d.name, d.kept, d.drop_reason) for d in decided]))
        return (self.batches.pop(0) if self.batches else []), None


def test_topic_option_defaults_and_bounds(tmp_path):
    from schemas.topic import TopicSpecError

    assert load_topic(make_topic(tmp_path / "a", "toy", VALID)).ideation.refills == 2
    assert load_topic(make_topic(tmp_path / "b", "toy", {**VALID, "ideation": {"refills": 0}})).ideation.refills == 0
    with pytest.raises(TopicSpecError, match="ideation.refills"):
        load_topic(make_topic(tmp_path / "c", "toy", {**VALID, "ideation": {"refills": 9}}))


def test_near_copies_are_refilled_to_the_budget():
    first = [idea("copy", "a2", "r2"), idea("b", "b", "r2")]  # copy: cosine 0.95 with the bank's old_a
    propose = Proposer([idea("again", "a", "r2"), idea("c", "c", "r2")],  # again: an exact copy of old_a
                       [idea("d", "d", "r2")])
    nov = Novelty({})
    filled = fill_round(first, BANK, embed, nov, threshold=0.8, budget=3, refills=2, propose=propose)
    by = {i.name: i for i in filled.ideas}
    assert [i.name for i in filled.ideas] == ["copy", "b", "again", "c", "d"]
    assert [n for n, i in by.items() if i.kept] == ["b", "c", "d"] and filled.kept == 3
    assert filled.proposals == 3 and [i.proposal for i in filled.ideas] == [0, 0, 1, 1, 2]
    assert by["again"].nearest_bank_idea == f"{TOPIC}/r1/old_a" and "cosine 1.00" in by["again"].drop_reason
    # each refill asked for what was missing, told every decision so far (the dropped ones with why)
    assert [(m, k) for m, k, _ in propose.calls] == [(2, 1), (1, 2)]
    told = propose.calls[0][2]
    assert told[0][0] == "copy" and told[0][1] is False and "too similar to" in told[0][2]
    assert told[1] == ("b", True, None)
    assert nov.asked == ["b", "c", "d"]  # novelty checked only the independent ones


def test_a_refill_continues_the_round_s_filter():
    """Algorithm 1 goes on across proposals: a refill that repeats this round's kept idea is a
    near-copy too, and the budget counts the ideas kept before it."""
    first = [idea("b", "b", "r2")]
    filled = fill_round(first, [], embed, Novelty({}), threshold=0.8, budget=2, refills=2,
                        propose=Proposer([idea("b_again", "b", "r2"), idea("c", "c", "r2"), idea("d", "d", "r2")]))
    by = {i.name: i for i in filled.ideas}
    assert by["b_again"].nearest_bank_idea == f"{TOPIC}/r2/b" and not by["b_again"].kept
    assert by["c"].kept and by["d"].drop_reason == "over the round's budget of 2 ideas"
    assert filled.proposals == 2 and dropped_by_filters(filled.ideas) == [by["b_again"]]


def test_the_bound_is_respected():
    propose = Proposer(*([idea(f"copy{k}", "a2", "r2")] for k in range(1, 6)))  # near-copies every time
    filled = fill_round([idea("copy0", "a", "r2")], BANK, embed, Novelty({}), threshold=0.8, budget=3, refills=2,
                        propose=propose)
    assert len(propose.calls) == 2 and filled.proposals == 3 and filled.kept == 0
    assert len(filled.ideas) == 3 and all(not i.kept for i in filled.ideas)
    # refills 0: DOLPHIN's single proposal
    none = fill_round([idea("copy0", "a", "r2")], BANK, embed, Novelty({}), threshold=0.8, budget=3, refills=0,
                      propose=Proposer([idea("c", "c", "r2")]))
    assert none.proposals == 1 and none.kept == 0
    # a full round asks nothing; a refill that brings nothing ends the refills
    p = Proposer()
    full = fill_round([idea("b", "b", "r2")], [], embed, Novelty({}), threshold=0.8, budget=1, refills=2, propose=p)
    assert p.calls == [] and full.proposals == 1
    p = Proposer([])
    empty = fill_round([idea("copy0", "a", "r2")], BANK, embed, Novelty({}), threshold=0.8, budget=3, refills=2,
                       propose=p)
    assert len(p.calls) == 1 and empty.proposals == 2


class IdeaLLM:
    def __init__(self, drafts):
        self.drafts, self.messages = drafts, []

    def complete(self, messages, *, stage, schema=None, max_tokens=512, **kw):
        self.messages.append(messages)
        return SimpleNamespace(ok=True, value=IdeaList(ideas=self.drafts), text="", error=None)


def test_the_refill_prompt_names_what_was_dropped_and_why():
    decided = fill_round([idea("copy", "a2", "r2"), idea("b", "b", "r2"), idea("late", "c", "r2")], BANK, embed,
                         Novelty({}), threshold=0.8, budget=1, refills=0, propose=Proposer()).ideas
    draft = IdeaDraft(Name="b", Title="Wider layer", Experiment="Double the hidden width.",
                      Summary="A wider hidden layer.", References=[1])
    llm = IdeaLLM([draft, draft])
    h = History(names={"old_a"}, tried=["old_a: Old A (decline)"])
    head = ("Toy", "A toy task.", "accuracy", "maximize", "LR = 0.1\n")
    new, err = propose_more(llm, head, [(1, "Paper one", "abstract")], [], [], h, TOPIC, "r2", 2, decided)
    assert err is None and [i.name for i in new] == ["b_2", "b_3"]  # unique against this round's and earlier names
    user = llm.messages[0][-1]["content"]
    assert "Propose 2 different ideas" in user and "Ideas already tried" in user and "old_a: Old A" in user
    dropped = user.split("were dropped by the filters")[1]
    assert "- copy: a2 (dropped: too similar to" in dropped
    assert "late" not in dropped  # over the budget is not a filter's verdict
    assert "This round already keeps these ideas:\n- b: B" in user
    assert user.index("The experiment code:") < user.index("were dropped")  # the ideas prompt's head comes first


def test_the_directions_left_untried_are_named():
    """After near-copies, the refill (and a later round's first request) names the directions no
    idea of the topic took, so the small model does not propose the same few again."""
    from assets.ideas import prompts
    from assets.ideas.angles import ANGLES, untried_angles

    tried = ["feature_selection: Feature Selection (decline)", "lr: Tune the learning rate schedule (failed)",
             "ens: Average three seeds (decline)"]
    left = untried_angles(tried)
    assert len(left) == len(ANGLES) - 2  # the optimiser and the averaging directions are taken
    assert not any("optimiser" in a or "averaging" in a for a in left) and any("loss" in a for a in left)
    assert untried_angles([]) == [a for a, _ in ANGLES]
    head = ("Toy", "A toy task.", "accuracy", "maximize", "LR = 0.1\n")
    user = prompts.refill(*head, [], tried, [], 2, ["a: Dropout before the head"], ["b: robust loss (dropped)"])[-1]
    text = user["content"]
    assert text.count("Directions no idea of this topic has taken yet") == 1
    listed = text.split("Directions no idea")[1].split("Propose 2")[0]
    assert "the loss or training objective" not in listed  # the dropped robust-loss idea took it
    assert "regularisation" not in listed and "a transform of the target" in listed
    # a later round's first request names them too; round 1 (nothing tried) does not
    assert "Directions no idea" in prompts.generate(*head, [], tried, [], 3)[-1]["content"]
    assert "Directions no idea" in prompts.brainstorm(*head, tried, [], 3)[-1]["content"]
    assert "Directions no idea" not in prompts.generate(*head, [], [], [], 3)[-1]["content"]


# -- the asset, with a scripted LLM server ---------------------------------------------------

class NearCopies(Script):
    """Round 2's first proposals are near-copies of round 1's ineffective ideas; the refills bring
    one near-copy and one new idea, then one new idea."""

    NEW = [("warmup", "Warm up the learning rate", "Raise the learning rate linearly over the first epochs so the "
            "early updates do not overshoot."),
           ("feature_cross", "Add a product feature", "Add the product of the two inputs as a third feature so "
            "the linear model can separate the classes by a curved boundary.")]

    def __init__(self):
        super().__init__()
        self.prompts: list[str] = []

    def answer(self, req):
        fmt = req.get("response_format") or {}
        if fmt.get("json_schema", {}).get("name") != "IdeaList":
            return super().answer(req)
        self.count("IdeaList")
        user = req["messages"][-1]["content"]
        self.prompts.append(user)
        n = int(re.search(r"Propose (\d+) different ideas", user).group(1))
        copies = [self.draft("sign_flip", "Negative step", "Flip the sign of the learning rate to test the "
                             "optimiser's direction, variant 2."),
                  self.draft("reseed", "Another seed", "Keep the learning rate but change the random seed."),
                  self.draft(*self.NEW[0])]
        refill = len(self.prompts) - 1
        if refill == 0:
            ideas = copies
        elif refill == 1:
            ideas = [self.draft("reseed_again", "Seed again", "Keep the learning rate but change the random seed."),
                     self.draft(*self.NEW[1])]
        else:
            ideas = [self.draft("bigger_batch", "Larger batches", "Use full-batch gradient descent instead of "
                                "mini-batches to make every step less noisy.")]
        return json.dumps({"ideas": ideas[:n]})

    @staticmethod
    def draft(name, title, summary):
        return {"Name": name, "Title": title, "Experiment": summary, "Summary": summary, "References": [],
                "Builds_on": []}


def materialize_r2(script):
    from assets import ALL_ASSETS
    from assets.shared.partitions import multi_key
    from tests.support.fake_llm import FakeLLMServer
    from tests.support.resources import make_resources

    with FakeLLMServer(script) as server:
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions("topics", [TOPIC])
        instance.add_dynamic_partitions("rounds", ["r2"])
        resources = make_resources(server.base_url)
        topic_level = dg.AssetSelection.groups("topic")
        assert dg.materialize(ALL_ASSETS, selection=topic_level, partition_key=TOPIC, instance=instance,
                              resources=resources).success
        upstream = dg.AssetSelection.assets("filtered_ideas").upstream() - topic_level
        assert dg.materialize(ALL_ASSETS, selection=upstream, partition_key=str(multi_key(TOPIC, "r2")),
                              instance=instance, resources=resources).success
    meta = instance.get_latest_materialization_event(dg.AssetKey("filtered_ideas")).asset_materialization.metadata
    return from_frame(Store().read("filtered_ideas", TOPIC, "r2"), FilteredIdea), meta


def test_a_round_of_near_copies_refills_to_its_budget(home):
    seed_round1(Store())  # round 1: negative_step_r1 (decline) and steady_r1 (maintenance) are in the bank
    script = NearCopies()
    out, meta = materialize_r2(script)
    by = {i.name: i for i in out}
    assert not by["sign_flip"].kept and by["sign_flip"].nearest_bank_idea == f"{TOPIC}/r1/negative_step_r1"
    assert not by["reseed"].kept and by["reseed"].nearest_bank_idea == f"{TOPIC}/r1/steady_r1"
    assert [i.name for i in out if i.kept] == ["warmup", "feature_cross", "bigger_batch"]  # the budget of 3
    assert [i.proposal for i in out] == [0, 0, 0, 1, 1, 2]
    assert meta["proposals"].value == 3 and meta["refills"].value == 2 and meta["kept"].value == 3
    assert meta["max_refills"].value == 2  # topic.yaml `ideation.refills` (default); the bound: tested above
    assert meta["ideas_proposed"].value == 6 and meta["dropped_by_filters"].value == 3
    assert "| proposal |" in meta["decisions"].value
    assert script.counts["IdeaList"] == 3  # the ideas asset's call + 2 refills (the bound)
    # the first refill was told what was dropped and why, and asked only for the missing two
    refill = script.prompts[1]
    assert "Propose 2 different ideas" in refill and "- sign_flip: Flip the sign" in refill
    assert "cosine" in refill.split("were dropped by the filters")[1]
    assert "This round already keeps these ideas:\n- warmup" in refill


def test_title_key_names_the_same_idea_in_other_words():
    from assets.filtered_ideas.filtering import repeated, title_key

    assert title_key("Regularization Parameter Tuning") == title_key("Tuning the regularization parameters")
    assert title_key("Feature Selection") == title_key("feature-selection")
    assert title_key("Feature Selection") != title_key("Feature Scaling")
    assert title_key("Loss") == title_key("loss") and title_key("Class Weights") == title_key("class weight")
    tried = [("t/r1/fs", "Feature Selection", "maintenance"), ("t/r1/rt", "Regularization Tuning", "failed")]
    assert repeated("Selection of features", tried) == tried[0]
    assert repeated("Tuning of the regularization", tried) == tried[1]
    assert repeated("Early Stopping", tried) is None and repeated("", tried) is None


def test_an_idea_repeating_an_earlier_tried_one_is_dropped_and_refilled():
    """A small model re-proposes an earlier idea under its old title with a vaguer summary the
    embeddings do not match (the diabetes run: "Feature Selection" in r1 and r2): the repeat rule
    drops it, whatever its earlier verdict, and also a second idea of the same title this round."""
    def titled(name, title, summary):
        return idea(name, summary, "r2").model_copy(update={"title": title})

    tried = [("t/r1/fs", "Feature Selection", "maintenance"), ("t/r1/bt", "Better Training", "improvement")]
    first = [titled("fs2", "Feature selection", "b"), titled("bt2", "better training", "c"),
             titled("new", "Class Weights", "d"), titled("new_again", "Class weight", "a2")]
    propose = Proposer([titled("fresh", "Early Stopping", "f")])
    nov = Novelty({})
    filled = fill_round(first, [], embed, nov, threshold=0.8, budget=2, refills=1, propose=propose, tried=tried)
    by = {i.name: i for i in filled.ideas}
    assert [n for n, i in by.items() if i.kept] == ["new", "fresh"]
    assert by["fs2"].drop_reason == "repeats t/r1/fs ('Feature Selection', maintenance)"
    assert by["fs2"].independent  # the embeddings alone would have kept it
    assert by["bt2"].drop_reason.startswith("repeats t/r1/bt")
    assert by["new_again"].drop_reason.startswith(f"repeats {TOPIC}/r2/new ('Class Weights', kept this round)")
    assert nov.asked == ["new", "fresh"]  # repeats cost no novelty search
    assert [(m, k) for m, k, _ in propose.calls] == [(1, 1)]
    assert "repeats" in propose.calls[0][2][0][2]  # the refill was told why
