"""What the LLM is asked to return, as pydantic models (their JSON schema is sent as
`response_format`). Categories instead of numbers where the small local model cannot grade."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class IdeaDraft(_Strict):
    Name: str = Field(max_length=40, description="short snake_case identifier")
    Title: str = Field(max_length=100)
    Experiment: str = Field(max_length=400, description="what to change in the code and how to test it")
    Summary: str = Field(max_length=400, description="two or three sentences")
    References: list[int] = Field(default_factory=list, max_length=5, description="numbers of the papers used")
    Builds_on: list[str] = Field(default_factory=list, max_length=3,
                                 description="Names of earlier effective ideas it extends")


class IdeaList(_Strict):
    ideas: list[IdeaDraft]


class NoveltyJudgement(_Strict):
    decision: Literal["novel", "not_novel"]
    closest_paper: int = Field(description="number of the closest paper, 0 if none")
    reason: str = Field(max_length=160)


class PlanDraft(_Strict):
    changes: list[Annotated[str, Field(max_length=200)]] = Field(
        min_length=1, max_length=4, description="the concrete code changes, one per item")
    location: str = Field(max_length=120, description="functions or classes to edit")
    evaluation: str = Field(max_length=150, description="how the result is measured")
    expected_effect: str = Field(max_length=150)
