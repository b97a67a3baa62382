"""What the LLM is asked to return, as pydantic models (their JSON schema is sent as
`response_format`). Categories instead of numbers where the small local model cannot grade."""
from __future__ import annotations

from functools import cache
from types import GenericAlias
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskAttributes(_Strict):
    # every free-text field has a maxLength: llama.cpp's grammar enforces it, so a small model
    # that starts repeating itself cannot run to max_tokens and leave truncated JSON
    task: str = Field(max_length=80, description="the task in a few words")
    input: str = Field(max_length=120, description="what the model receives")
    output: str = Field(max_length=120, description="what the model predicts")
    domain: str = Field(max_length=60, description="research field")
    evaluation: str = Field(max_length=100, description="how results are measured")
    search_query: str = Field(max_length=80, description="a short literature search query for this task")


Relevance = Literal["same_task", "neighbouring_task", "same_field_other_task", "unrelated"]
AttributeMatch = Literal["input_and_output_match", "only_input_matches", "only_output_matches", "neither_matches"]


class PaperJudgement(_Strict):
    # short fields: the local model decodes ~10 tokens/s and 30 papers are judged per round
    paper_task: str = Field(max_length=60, description="the task the paper addresses, in a few words")
    relevance: Relevance
    attribute_match: AttributeMatch
    reason: str = Field(max_length=90, description="one short sentence")


class PaperAttributes(_Strict):
    # a paper's own task attributes, asked without the topic (so the model cannot copy ours) and
    # compared with the topic's in code (assets/paper_rankings/scoring.py): the 1.5B model names what a paper
    # does well but cannot tell a neighbouring task from ours
    task: str = Field(max_length=60, description="the paper's own task in a few words")
    input: str = Field(max_length=60, description="what the paper's model receives")
    output: str = Field(max_length=60, description="what the paper's model predicts")


class PaperRelevance(_Strict):
    # relevance to the topic, asked without task attributes: the naive ranking (DOLPHIN's
    # baseline) uses it alone, the attribute ranking combines it with the attribute agreement
    relevance: Relevance


@cache
def paper_batch(item: type[BaseModel], n: int) -> type[BaseModel]:
    """The answer for n papers judged in one request: exactly n items, in the papers' order
    (the grammar enforces the count). One class per (item, n), named e.g. PaperAttributesBatch."""
    papers: Any = GenericAlias(list, (item,))  # list[item], for a class known only at run time
    return create_model(f"{item.__name__}Batch", __base__=_Strict,
                        papers=(papers, Field(min_length=n, max_length=n)))


class Entities(_Strict):
    """The key entities of a paper or a topic (SciPIP's entity extraction, assets/ideas/scipip.py)."""
    entities: list[Annotated[str, Field(max_length=50)]] = Field(
        min_length=1, max_length=5, description="noun phrases of 1 to 4 words, most specific first")


class IdeaDraft(_Strict):
    Name: str = Field(max_length=40, description="short snake_case identifier")
    Title: str = Field(max_length=100)
    Experiment: str = Field(max_length=400, description="what to change in the code and how to test it")
    Summary: str = Field(max_length=400, description="two or three sentences")
    References: list[int] = Field(default_factory=list, max_length=5, description="numbers of the papers used")
    Builds_on: list[str] = Field(default_factory=list, max_length=3,
                                 description="Names of earlier effective ideas it extends")
    # asked when the prompt shows method cards (assets/ideas/prompts.py); a card that was not shown is
    # dropped when the draft becomes an Idea (assets/ideas/generation.py drafts_to_ideas)
    method_card: str | None = Field(None, max_length=60, description="paper id of the method card it applies, "
                                    "empty if none")
    code_place: str | None = Field(None, max_length=120, description="the function, class or lines of the code "
                                   "it changes")


class IdeaList(_Strict):
    ideas: list[IdeaDraft]


class CardIdea(_Strict):
    """One idea that applies a given method card to the code (assets/ideas/prompts.py `apply_card`):
    the place in the code first, so the change is written for that place. Short fields: the local
    model writes one of these per card."""
    Title: str = Field(max_length=100, description="what the change does, in a few words")
    code_place: str = Field(max_length=120, description="the function, class or lines of the code that change")
    Experiment: str = Field(max_length=400, description="what those lines become: the call with its arguments or "
                            "the few new lines, and what else must change with them")
    Summary: str = Field(max_length=300, description="why this should help on this task and data, two sentences")


def idea_list(n: int) -> type[IdeaList]:
    """IdeaList whose JSON schema allows at most n ideas (maxItems), so the server's grammar ends the
    list there instead of letting the model write ideas that run into the answer limit; the
    answer is still validated as IdeaList (the caller keeps the first n). Still named IdeaList."""
    return create_model("IdeaList", __base__=IdeaList,
                        ideas=(list[IdeaDraft], Field(json_schema_extra={"maxItems": max(1, n)})))


class ChainIdeas(_Strict):
    """The chains source's answer for one chain of papers (assets/ideas/chains.py): the trend first,
    then the predicted next step, then the ideas (generated in this order, so the ideas follow the
    reasoning). Short fields: the local model writes one of these per chain."""
    trend: str = Field(max_length=500, description="how the methods changed from each paper to the next, "
                       "one short sentence per step")
    prediction: str = Field(max_length=250, description="the next step this line of work would take")
    ideas: list[IdeaDraft] = Field(min_length=1, max_length=5)


@cache
def chain_ideas(k: int) -> type[ChainIdeas]:
    """ChainIdeas with at most k ideas (the grammar then stops the model there instead of letting it
    write ideas that would be cut off); still named ChainIdeas."""
    return create_model("ChainIdeas", __base__=ChainIdeas,
                        ideas=(list[IdeaDraft], Field(min_length=1, max_length=max(1, min(k, 5)))))


class NoveltyQuery(_Strict):
    """First step of the novelty check: what to search for."""
    query: str = Field(min_length=3, max_length=80, description="a short literature search query")


# closest paper and reason come before the decision: the model writes its comparison first
# and decides after it (llama.cpp's grammar generates the properties in this order)
class NoveltyStep(_Strict):
    """A step of the novelty check that may ask for one more search instead of deciding."""
    closest_paper: int = Field(description="number of the closest paper, 0 if none")
    reason: str = Field(max_length=120,
                        description="how the closest paper differs from the idea, or that it does the same")
    decision: Literal["search_again", "novel", "not_novel"]
    query: str = Field(max_length=80, description="the next search query if search_again, else empty")


class NoveltyJudgement(_Strict):
    """The last step of the novelty check: a decision."""
    closest_paper: int = Field(description="number of the closest paper, 0 if none")
    reason: str = Field(max_length=160,
                        description="how the closest paper differs from the idea, or that it does the same")
    decision: Literal["novel", "not_novel"]


class PlanDraft(_Strict):
    changes: list[Annotated[str, Field(max_length=200)]] = Field(
        min_length=1, max_length=4, description="the concrete code changes, one per item")
    location: str = Field(max_length=120, description="functions or classes to edit")
    evaluation: str = Field(max_length=150, description="how the result is measured")
    expected_effect: str = Field(max_length=150)


class RoundAnalysis(_Strict):
    worked: str = Field(max_length=300, description="what worked and the likely reason")
    failed: str = Field(max_length=300, description="what did not work and the likely reason")
    next_direction: str = Field(max_length=200, description="what the next round should try")

