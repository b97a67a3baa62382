"""A scripted novelty judge and the idea it judges."""
from __future__ import annotations

import json

from pydantic import ValidationError

from resources.llm import LLMCall, LLMResult


class ScriptedLLM:
    """Answers in order; validates each answer against the requested schema like LLM.complete
    does after its retries (an invalid answer comes back as an error, never raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[tuple[list[dict], str]] = []
        self.items: list[str | None] = []  # the idea each call was accounted to

    def complete(self, messages, *, stage, schema=None, max_tokens=512, item=None):
        self.requests.append(([dict(m) for m in messages], schema.__name__))
        self.items.append(item)
        a = self.answers.pop(0)
        text = a if isinstance(a, str) else json.dumps(a)
        call = LLMCall(stage=stage, model="scripted")
        try:
            return LLMResult(value=schema.model_validate_json(text), text=text, call=call)
        except ValidationError as e:
            return LLMResult(text=text, call=call, error=f"invalid answer (try 3): {str(e)[:80]}")

    @property
    def schemas(self) -> list[str]:
        return [s for _, s in self.requests]


def q(text):
    return {"query": text}


def judge(decision, closest=0, reason="r"):
    return {"decision": decision, "closest_paper": closest, "reason": reason}


IDEA = ("Point cloud classification", "Random rotation augmentation",
        "Rotate every training shape by a random angle about the vertical axis.")
