"""Method papers through the loop: the ranking keeps applicable method papers (assets/paper_rankings/
methods.py), the ideas prompt shows their cards and the ideas name the card they apply
(assets/ideas/generation.py, prompts.py), and the new Idea fields round-trip. Pure functions, no LLM."""
import json

from assets.ideas import prompts
from assets.ideas.generation import History, chosen_card, drafts_to_ideas, shown_cards
from assets.paper_rankings.methods import keep_method_papers, with_method_papers
from assets.paper_rankings.scoring import KEEP_AT
from resources.method_cards import applicable, load_cards, topic_kinds
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaDraft, IdeaList
from schemas.records import FilteredIdea, Idea, PaperScore, TopicBrief
from schemas.topic import IdeationSpec

BRIEF = TopicBrief(topic="houses", title="House price regression",
                   description="Predict the sale price of a house from tabular features (numeric and categorical "
                               "columns). The baseline is a ridge regression; the metric is RMSE on a held-out split.",
                   metric_name="rmse", metric_goal="minimize", task="house price regression",
                   input="tabular features of a house", output="sale price", domain="machine learning",
                   evaluation="RMSE", search_query="tabular regression deep learning")

# what a similarity ranking gave a tabular-regression topic: the deep tabular papers share its words
# and are kept; gradient boosting and the trees-vs-nets study fall below the cut
RANKED = [("arik2021tabnet", 9), ("huang2020tabtransformer", 8), ("chen2016xgboost", 5), ("grinsztajn2022why", 6),
          ("lundberg2017unified", 7), ("kipf2017semi", 7), ("yun2019cutmix", 7), ("kingma2015adam", 7),
          ("not_a_card_paper", 7)]


def _scores(ranked=RANKED):
    return [PaperScore(paper_id=pid, title=pid, relevance="n/a", attribute_match="n/a", score=score,
                       kept=score >= KEEP_AT, reason="abstract similarity", mode="similarity") for pid, score in ranked]


def test_the_ranking_keeps_applicable_method_papers_for_a_tabular_regression_topic():
    kinds = topic_kinds(BRIEF.title, BRIEF.description, BRIEF.metric_name)
    assert kinds.data == {"tabular"} and kinds.task == {"regression"}
    fits = applicable([pid for pid, _ in RANKED], kinds)
    assert "kipf2017semi" not in fits and "yun2019cutmix" not in fits and "not_a_card_paper" not in fits
    assert fits["chen2016xgboost"] == fits["grinsztajn2022why"] == 4 and fits["kingma2015adam"] == 2

    # 3 places beyond the papers kept on their score: one at a time, the closest fit first, a library call
    # not chosen yet before a card without one before a repeated call (the generic optimiser fits worse)
    out = keep_method_papers(_scores(), fits, 3)
    kept = [s.paper_id for s in out if s.kept]
    assert kept == ["arik2021tabnet", "huang2020tabtransformer", "chen2016xgboost", "grinsztajn2022why",
                    "lundberg2017unified"]
    added = {s.paper_id: s for s in out}
    assert added["grinsztajn2022why"].reason.startswith("kept as an applicable method paper (1 of 3;")
    assert added["lundberg2017unified"].reason.startswith("kept as an applicable method paper (2 of 3;")
    assert added["chen2016xgboost"].score == KEEP_AT and "ranked 5" in added["chen2016xgboost"].reason
    assert all(s.kept == (s.score >= KEEP_AT) for s in out)  # the asset's check still holds
    assert [s.paper_id for s in keep_method_papers(_scores(), fits, 1) if s.kept][-1] == "grinsztajn2022why"
    # a call the reference code already makes comes after the others
    code = "from sklearn.ensemble import HistGradientBoostingRegressor\nmodel = HistGradientBoostingRegressor()\n"
    assert [s.paper_id for s in keep_method_papers(_scores(), fits, 1, code=code) if s.kept][-1] == \
        "lundberg2017unified"
    # deterministic, and the setting turns it off
    assert keep_method_papers(_scores(), fits, 3) == out
    assert keep_method_papers(_scores(), fits, 0) == _scores()
    assert len([s for s in keep_method_papers(_scores(), fits, 10) if s.kept]) == 2 + 4  # every applicable one


def test_a_paper_the_ranking_failed_on_is_not_kept_and_a_topic_without_kinds_gets_none():
    scores = _scores()
    scores[2] = scores[2].model_copy(update={"error": "no answer", "score": 1})
    out, kinds, added = with_method_papers(BRIEF, scores, 3)
    assert added == 3 and not {s.paper_id: s for s in out}["chen2016xgboost"].kept
    vague = BRIEF.model_copy(update={"title": "Make it better", "description": "Improve the number.",
                                     "task": "improve", "input": "x", "output": "y", "evaluation": "score",
                                     "metric_name": "score"})
    out, kinds, added = with_method_papers(vague, _scores(), 3)
    assert not kinds.known and added == 0 and out == _scores()
    assert IdeationSpec().method_papers == 3


HEAD = (BRIEF.title, BRIEF.description, "rmse", "minimize", "import numpy as np\n\ndef train(X, y): ...\n")


def test_the_ideas_prompt_shows_the_applicable_cards_and_asks_for_card_and_place():
    kept = [s for s in keep_method_papers(_scores(), applicable([p for p, _ in RANKED], topic_kinds(
        BRIEF.title, BRIEF.description, "rmse")), 3) if s.kept]
    cards = shown_cards(kept, HEAD)
    assert [(i, pid) for i, pid, _ in cards] == [(1, "arik2021tabnet"), (2, "huang2020tabtransformer"),
                                                 (3, "chen2016xgboost"), (4, "grinsztajn2022why"),
                                                 (5, "lundberg2017unified")]
    refs = [(i, s.title, "abstract") for i, s in enumerate(kept, 1)]
    text = prompts.generate(*HEAD, refs, [], [], 3, cards=cards)[-1]["content"]
    assert "[3] Method card chen2016xgboost (tabular data, classification/regression)" in text
    assert "sklearn.ensemble.HistGradientBoostingRegressor(max_iter=500, learning_rate=0.05" in text
    assert "method_card" in text and "code_place" in text
    assert "PyTorch" not in text and "libraries the code already uses" in text
    # without cards the request is the one it was
    plain = prompts.generate(*HEAD, refs, [], [], 3)[-1]["content"]
    assert "Method card" not in plain and "method_card" not in plain
    # the refill request carries the same cards
    refill = prompts.refill(*HEAD, refs, [], [], 2, [], [], cards=cards)[-1]["content"]
    assert "[3] Method card chen2016xgboost" in refill and refill.index("Method cards") < refill.index("Propose 2")
    # a card for another kind of data is not shown to this topic
    image = [PaperScore(paper_id="yun2019cutmix", title="CutMix", relevance="n/a", attribute_match="n/a", score=9,
                        kept=True, reason="r")]
    assert shown_cards(image, HEAD) == []
    assert [pid for _, pid, _ in shown_cards(image, ("CIFAR", "classify images", "accuracy"))] == ["yun2019cutmix"]


def test_a_parsed_idea_keeps_the_card_it_names_and_drops_one_not_shown():
    kept = [PaperScore(paper_id=pid, title=pid, relevance="n/a", attribute_match="n/a", score=9, kept=True,
                       reason="r") for pid in ("arik2021tabnet", "chen2016xgboost")]
    answer = json.dumps({"ideas": [
        {"Name": "boosted_trees", "Title": "Gradient boosting", "Experiment": "Replace Ridge by boosted trees.",
         "Summary": "s", "References": [2], "method_card": "chen2016xgboost", "code_place": " train() "},
        {"Name": "by_number", "Title": "t", "Experiment": "e", "Summary": "s", "method_card": "[2]"},
        {"Name": "not_shown", "Title": "t", "Experiment": "e", "Summary": "s", "method_card": "yun2019cutmix"},
        {"Name": "no_card", "Title": "t", "Experiment": "e", "Summary": "s"},
    ]})
    drafts = IdeaList.model_validate_json(answer).ideas
    ideas = drafts_to_ideas(drafts, "houses", "r1", kept, History(), cards=["chen2016xgboost"])
    assert [(i.method_card, i.code_place) for i in ideas] == [("chen2016xgboost", "train()"),
                                                              ("chen2016xgboost", None), (None, None), (None, None)]
    assert ideas[0].inspired_by_papers == ["chen2016xgboost"]
    # a source that showed no card records none, whatever the draft says
    assert drafts_to_ideas(drafts[:1], "houses", "r1", kept, History())[0].method_card is None
    assert chosen_card("Method card CHEN2016XGBOOST", kept, {"chen2016xgboost"}) == "chen2016xgboost"
    assert chosen_card("paper 1", kept, {"chen2016xgboost"}) is None   # paper 1 has no shown card
    assert IdeaDraft(Name="n", Title="t", Experiment="e", Summary="s").method_card is None


def test_idea_with_a_card_round_trips_and_old_records_load():
    idea = Idea(idea_id="i", topic="t", round="r1", name="n", title="t", experiment="e", summary="s",
                method_card="chen2016xgboost", code_place="fit_model()")
    assert from_frame(to_frame([idea], Idea), Idea) == [idea]
    assert Idea.model_validate_json(idea.model_dump_json()) == idea
    filtered = FilteredIdea(**idea.model_dump(), max_similarity=0.1, independent=True, kept=True)
    assert from_frame(to_frame([filtered], FilteredIdea), FilteredIdea)[0].method_card == "chen2016xgboost"
    old = {k: v for k, v in idea.model_dump().items() if k not in ("method_card", "code_place")}
    assert Idea.model_validate(old).method_card is None
    assert load_cards()["chen2016xgboost"].library == "sklearn.ensemble.HistGradientBoostingRegressor"


def test_the_patch_prompt_carries_the_card_of_the_idea():
    from assets.patched_code.prompts import implement

    code = "def train(X, y):\n    return X\n"
    args = (code, "experiment.py", "whole", "Gradient boosting", "Replace ridge.", ["use boosted trees"])
    text = implement(*args, method_card="chen2016xgboost")[-1]["content"]
    assert "The idea applies this method: Method card chen2016xgboost" in text
    assert text.index("applies this method") < text.index("Planned changes")
    assert "applies this method" not in implement(*args)[-1]["content"]
    assert "applies this method" not in implement(*args, method_card="no_such_paper")[-1]["content"]


# -- one idea per card ------------------------------------------------------------------------------

class _Res:
    def __init__(self, value=None, error=None):
        self.value, self.error, self.ok = value, error, error is None


class _CardLLM:
    """Answers every card request with a CardIdea naming the card it was shown (a fake: no server);
    the cards in `fail` get an unusable answer."""

    def __init__(self, fail=()):
        self.fail, self.asked = set(fail), []

    def map(self, fn, items, shared_prefix=False):
        assert shared_prefix  # the card requests share the task and the code
        return [fn(x) for x in items]

    def complete(self, messages, *, stage, schema, max_tokens, item):
        from schemas.llm_outputs import CardIdea

        self.asked.append((item, messages[-1]["content"]))
        if item in self.fail:
            return _Res(error="not valid JSON")
        assert schema is CardIdea and stage == "ideas"
        return _Res(CardIdea(Title=f"Apply {item} to the model", code_place="train()",
                             Experiment=f"Call {item}'s library in train().", Summary="It suits tabular data."))


CARD_CODE = "from sklearn.linear_model import Ridge\n\ndef train(X, y):\n    return Ridge().fit(X, y)\n"


def test_the_cards_applied_are_untried_and_from_the_codes_own_stack_first():
    from assets.ideas.generation import card_choices

    shown = [(1, "tibshirani1996regression", "lasso"), (2, "lundberg2017unified", "shap"),
             (3, "srivastava2014dropout", "dropout"), (4, "chen2016xgboost", "boosting"),
             (5, "grinsztajn2022why", "trees vs nets")]
    cards = load_cards()
    assert cards["tibshirani1996regression"].library.startswith("sklearn.linear_model.")
    assert cards["srivastava2014dropout"].library.startswith("torch.")
    # scikit-learn's trees first (the ridge code's own package, another module); then the cards of
    # other packages (dropout needs PyTorch) or none; the lasso card, the ridge's own family, last
    order = [pid for _, pid, _ in card_choices(shown, CARD_CODE, set(), 5)]
    assert order[:2] == ["chen2016xgboost", "grinsztajn2022why"] and order[-1] == "tibshirani1996regression"
    assert set(order[2:4]) == {"lundberg2017unified", "srivastava2014dropout"}
    assert [pid for _, pid, _ in card_choices(shown, CARD_CODE, {"chen2016xgboost"}, 2)] == [
        "grinsztajn2022why", order[2]]
    # for PyTorch code the dropout card is of its own stack
    torch_code = "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 1)\n"
    assert card_choices(shown, torch_code, set(), 1)[0][1] == "srivastava2014dropout"
    assert card_choices(shown, CARD_CODE, set(), 0) == [] and card_choices([], CARD_CODE, set(), 3) == []


def test_each_card_gets_its_own_request_and_its_idea_records_the_card():
    from assets.ideas.generation import card_ideas

    kept = [PaperScore(paper_id=pid, title=pid, relevance="n/a", attribute_match="n/a", score=9, kept=True,
                       reason="r") for pid in ("arik2021tabnet", "chen2016xgboost", "grinsztajn2022why")]
    chosen = [(2, "chen2016xgboost", "Method card chen2016xgboost (tabular data, regression): boost trees."),
              (3, "grinsztajn2022why", "Method card grinsztajn2022why (tabular data, regression): use trees.")]
    llm = _CardLLM(fail={"grinsztajn2022why"})
    history = History(tried=["ridge_alpha: Tune alpha (maintenance)"])
    ideas, errors = card_ideas(llm, HEAD, chosen, kept, history, "houses", "r1", set(), data="train.csv: 3 columns")
    assert [i.method_card for i in ideas] == ["chen2016xgboost"]
    idea = ideas[0]
    assert idea.name == "apply_chen2016xgboost_to_the_model" and idea.code_place == "train()"
    assert idea.inspired_by_papers == ["chen2016xgboost"] and idea.source == "ranking"
    assert errors == ["grinsztajn2022why: not valid JSON"]
    first = llm.asked[0][1]
    # the task and the code first (the other idea requests' head), then the data, what was tried, one card
    assert first.startswith(prompts.generate(*HEAD, [], [], [], 3)[-1]["content"].split("Reference papers")[0])
    assert "train.csv: 3 columns" in first and "ridge_alpha: Tune alpha (maintenance)" in first
    assert "Method card chen2016xgboost" in first and "grinsztajn2022why" not in first
    assert "code_place" in first and "minimize rmse" in first


def test_the_history_remembers_the_cards_kept_ideas_applied(tmp_path):
    from assets.ideas.generation import read_history
    from resources.store import Store

    def filtered(name, card, kept):
        return FilteredIdea(idea_id=f"t/r1/{name}", topic="t", round="r1", name=name, title=name, experiment="e",
                            summary="s", method_card=card, max_similarity=0.0, independent=True, kept=kept)

    store = Store(tmp_path)
    store.write(to_frame([filtered("boost", "chen2016xgboost", True), filtered("lasso", "tibshirani1996regression",
                                                                                False),
                          filtered("plain", None, True)], FilteredIdea), "filtered_ideas", "t", "r1")
    # a card whose idea the filters dropped was never tried: a later round may apply it
    assert read_history(store, "t", "r2").cards == {"chen2016xgboost"}


def test_an_experiment_that_describes_no_change_gives_way_to_the_summary():
    kept = [PaperScore(paper_id="chen2016xgboost", title="x", relevance="n/a", attribute_match="n/a", score=9,
                       kept=True, reason="r")]
    drafts = [IdeaDraft(Name="a", Title="Boost", Experiment="model", Summary="Replace the ridge by boosted trees."),
              IdeaDraft(Name="b", Title="Boost", Experiment="train_features.csv", Summary="Use boosted trees."),
              IdeaDraft(Name="c", Title="Boost", Experiment="Swap Ridge for HistGradientBoostingRegressor in fit().",
                        Summary="Trees.")]
    ideas = drafts_to_ideas(drafts, "houses", "r1", kept, History())
    assert [i.experiment for i in ideas] == ["Replace the ridge by boosted trees.", "Use boosted trees.",
                                             "Swap Ridge for HistGradientBoostingRegressor in fit()."]


def test_the_llm_sources_are_asked_for_the_places_the_tuning_moves_leave():
    """Ideas beyond the round's places would be filtered out unread: each LLM source is asked for
    the budget less the places the tuning source has moves for, unless ideation.candidates says otherwise."""
    from assets.ideas.generation import ideas_asked
    from schemas.topic import IdeationSpec

    both = IdeationSpec(sources=["ranking", "tuning"])
    assert ideas_asked(both, 3, 1, 3) == 2  # one place for a move, moves to fill it: two places left
    assert ideas_asked(both, 3, 1, 0) == 3  # code without a knob to move: the LLM has every place
    assert ideas_asked(both, 3, 2, 1) == 2  # two places, one move
    assert ideas_asked(IdeationSpec(sources=["ranking"]), 3, None, 0) == 3  # no tuning source
    assert ideas_asked(IdeationSpec(sources=["ranking", "tuning"], candidates=6), 3, 1, 3) == 6
    assert ideas_asked(both, 1, 1, 1) == 1  # at least one
