"""A method card: what applying one corpus paper's method changes in an experiment, which data and
tasks it suits, and (where one exists) a library callable of the locked environment that does it
(corpus/method_cards.jsonl; loaded by resources/method_cards.py)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# small fixed vocabularies: the ranking matches a card to a topic by them (resources/method_cards.py)
DataKind = Literal["tabular", "image", "text", "sequence", "graph", "point-cloud", "audio", "any"]
TaskKind = Literal["classification", "regression", "generation", "decision", "any"]


class AppliesTo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: list[DataKind] = Field(min_length=1, description="the kinds of data the method suits; any: all")
    task: list[TaskKind] = Field(min_length=1, description="the kinds of output it suits; any: all")


class MethodCard(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paper_id: str = Field(description="the corpus paper (corpus/papers.jsonl) whose method this is")
    change: str = Field(min_length=20, max_length=400, description="what applying the method changes in an "
                        "experiment, in one or two concrete sentences (our own words)")
    applies_to: AppliesTo
    library: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$",
                                description="import path of a callable of the locked environment that applies it")
    settings: dict[str, Any] = Field(default_factory=dict, description="typical keyword arguments of `library`; "
                                     "an optimiser's parameters, a scheduler's optimiser and a wrapper's model or "
                                     "module are the caller's and not listed")

    @model_validator(mode="after")
    def _settings_need_a_library(self) -> MethodCard:
        if self.settings and not self.library:
            raise ValueError("settings without a library")
        return self
