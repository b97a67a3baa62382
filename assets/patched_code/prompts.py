"""The prompt that implements an idea as an edit of the reference file. The edit format's own
instructions (with a worked example: the small local model follows a format only when it has
seen one) come from the registry in assets/editing/edit_formats/."""
from collections.abc import Sequence

from assets.editing.edit_formats import instructions
from assets.editing.prompts import rules, system_prompt
from assets.experiment_plans.planning import MODULE
from assets.shared.data_profile import data_section
from resources.method_cards import card_text


def implement(code: str, filename: str, edit_format: str, title: str, summary: str, changes: list[str],
              functions: list[str] | tuple[str, ...] = (), extra: str = "", data: str = "",
              method_card: str | None = None, entry_points: Sequence[str] = ()) -> list[dict]:
    """`functions`: the definitions the plan changes (named in the prompt, so a changed-definitions
    answer knows what to return); `extra`: the draft's own instruction (assets/editing/drafts.py);
    `data`: the topic folder's data profile (assets/shared/data_profile.py), shown as a Data section;
    `method_card`: the paper id of the method card the idea applies (Idea.method_card), shown after
    the idea; `entry_points`: the functions the task's evaluator calls (TopicSpec.entry_points), kept
    by the edit."""
    card = card_text(method_card) if method_card else None
    steps = "\n".join(f"- {c}" for c in changes)
    where = ""
    if functions:
        names = [("the top-level statements" if f == MODULE else f"`{f}`") for f in functions]
        where = f"The plan changes these parts of {filename}: {', '.join(names)}.\n"
    # the parts every idea of the round shares (the file, the data, the rules) come first, so the
    # server reuses them for the next idea's patch; the idea, its plan and the answer format last
    shared = (f"{data_section(data)}\n" if data.strip() else "") + f"{rules(code, entry_points)}\n\n"
    return [
        {"role": "system", "content": system_prompt(code, filename)},
        {"role": "user", "content": (
            shared + f"Implement this idea: {title}\n{summary}\n"
            + (f"The idea applies this method: {card}\n" if card else "")
            + f"Planned changes:\n{steps}\n{where}\n"
            + (f"{extra}\n" if extra else "") + instructions(edit_format, filename))},
    ]
