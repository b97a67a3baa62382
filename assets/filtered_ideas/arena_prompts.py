"""The Idea Arena's judge (Chain-of-Ideas, its pairwise idea comparison, in our own words): two
candidate changes to the same experiment, compared on four criteria. The task and the code come
first and are the same in every pair, so the server's prefix cache reuses them across the
tournament; only the two ideas (in the order being asked) differ."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# criterion -> what the judge is told it means; the keys are the answer's fields
CRITERIA: dict[str, str] = {
    "novelty": "which idea is the less obvious change, not a routine tweak anyone would try first",
    "feasibility": "which idea can be implemented in this one file, within the same training time, "
                   "with less risk of breaking the run",
    "effect": "which idea is more likely to improve the metric over the current code",
    "clarity": "which idea says more precisely what to change and how to tell whether it worked",
}

Choice = Literal["A", "B", "tie"]


class ArenaJudgement(BaseModel):
    """One pair, one order: the reason first (the model compares before it picks), then a choice per
    criterion. Field order is the generation order under llama.cpp's grammar."""
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(max_length=200, description="one or two sentences comparing the two ideas")
    novelty: Choice
    feasibility: Choice
    effect: Choice
    clarity: Choice


SYSTEM = ("You judge proposed changes to a machine-learning experiment. You compare two ideas at a "
          "time, criterion by criterion. Which idea is shown first and which is longer must not "
          "influence you; answer tie when neither is better on a criterion.")


def judge(title: str, description: str, metric: str, goal: str, code: str,
          a: tuple[str, str, str], b: tuple[str, str, str]) -> list[dict]:
    """Messages asking to compare idea A and idea B, each given as (title, summary, experiment)."""
    def show(label: str, idea: tuple[str, str, str]) -> str:
        t, s, e = idea
        return f"Idea {label}: {t.strip()}\n{s.strip()}\nWhat to change: {e.strip()}"

    rules = "\n".join(f"- {name}: {what}" for name, what in CRITERIA.items())
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Task: {title}\n{description.strip()}\nWe want to {goal} {metric}.\n\n"
            f"The experiment code:\n```python\n{code}\n```\n\n"
            f"{show('A', a)}\n\n{show('B', b)}\n\n"
            "Compare the two ideas. First give a short reason, then for each criterion answer A, B or tie:\n"
            f"{rules}")},
    ]
