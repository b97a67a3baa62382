"""A scripted LLM for the patching stage and its whole-file answers."""
from __future__ import annotations


class ScriptedLLM:
    """Answers in order (the last repeats), applying `parse` like resources.llm.LLM; records how
    each call was sampled."""

    def __init__(self, *answers: str):
        self.answers, self.asked = list(answers), []

    def resolved_edit_format(self) -> str:
        return "whole"

    def complete(self, messages, *, stage, parse=None, max_tokens=512, max_retries=None, item=None,
                 temperature=None, seed=None, schema=None):
        from types import SimpleNamespace

        self.asked.append({"messages": messages, "temperature": temperature, "seed": seed,
                           "max_retries": max_retries})
        text = self.answers[min(len(self.asked), len(self.answers)) - 1]
        from resources.llm import error_kind_of

        try:
            return SimpleNamespace(ok=True, value=parse(text), text=text, error=None, error_kind=None)
        except ValueError as e:  # the kind travels as a value, as in resources.llm.LLM
            return SimpleNamespace(ok=False, value=None, text=text, error=f"invalid answer (try 1): {e}",
                                   error_kind=error_kind_of(e))


def _whole(code: str) -> str:
    return f"```python\n{code}```"
