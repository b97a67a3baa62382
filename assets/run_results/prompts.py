"""Debugging prompts (DOLPHIN 3.2), in three modes to reproduce the paper's Table 4:
- "structure": the traceback plus the local code structure (the source of the functions the
  error passed through); the model first writes its analysis of that structure (`analyse`),
  then fixes the error from the error, the structure and its analysis (`fix`);
- "traceback": the traceback only, fixed in one step;
- "error": only the final error line, fixed in one step."""
from collections.abc import Sequence

from assets.editing.edit_formats import instructions
from assets.editing.prompts import rules, system_prompt

MODES = ("structure", "traceback", "error")

# the re-ask after an answer that gave back a version already run (repair_search.run_with_repair)
DIFFERENT_CHANGE = "A different change is needed"

GENERIC_RULES = ("Keep what the script does: its training, its evaluation and the results it writes. "
                 "Do not silence the error with try/except.")


def _failure(error: str, structure: str, title: str, mode: str) -> str:
    """The shared head of the debugging prompts (same prefix: the server reuses its cache)."""
    what = f"The file implements the idea '{title}' but running it failed with" if title else "Running it failed with"
    where = (f"\nThe code the error passed through (local code structure):\n{structure}\n"
             if mode == "structure" and structure else "")
    return f"{what}:\n{error}\n{where}"


def _facts(notes: str, mode: str) -> str:
    """The notes on the error (assets/editing/error_notes.py), "structure" mode only: checked by the tool,
    so they come last before the instructions, after the model's own analysis."""
    if mode != "structure" or not notes.strip():
        return ""
    return f"\nFacts about this error, checked by the tool:\n{notes.strip()}\n"


def analyse(code: str, filename: str, error: str, structure: str, title: str = "", *, notes: str = "") -> list[dict]:
    """Step 1 of "structure" debugging: the model writes the error-related code structure."""
    return [
        {"role": "system", "content": system_prompt(code, filename, api=True)},
        {"role": "user", "content": _failure(error, structure, title, "structure") + _facts(notes, "structure") + (
            "\nDo not write code yet. In at most three short sentences, describe the error-related "
            "code structure: the lines the error passes through (marked '<-- error path'), what they "
            "expect there (shapes, types, names, devices), and which line causes the error and why.")},
    ]


def fix(code: str, filename: str, edit_format: str, error: str, structure: str, title: str,
        *, mode: str = "structure", analysis: str = "",
        generic: bool = False, notes: str = "", rejected: str = "", unhelpful: str = "",
        repeated: str = "", entry_points: Sequence[str] = ()) -> list[dict]:
    """Step 2 (or the only step): propose the fix, in `mode` (see repair_search.MODES); with
    `generic` (a plain script, not a topic) the rules speak of the script, not final_info.json.
    `rejected`: a fix of this code that broke the script; `unhelpful`: fixes after which it
    still failed with the same error (both were run and set aside by the repair search).
    `repeated` (`repeated_versions`): the last answer gave back a version already run; the
    versions already run are shown instead of `rejected` and `unhelpful`, and a different
    change asked for."""
    note = f"\nAnalysis of the error:\n{analysis.strip()}\n" if mode == "structure" and analysis.strip() else ""
    if repeated.strip():
        note += "\n" + repeated.strip() + "\n"
    else:
        if rejected.strip():
            note += ("\nThis fix was tried already and made things worse; do not propose it again:\n"
                     f"{rejected.strip()}\n")
        if unhelpful.strip():
            note += ("\nThis fix was tried already and the script still failed with the same error, so it "
                     f"missed the cause; find another one:\n{unhelpful.strip()}\n")
    return [
        {"role": "system", "content": system_prompt(code, filename, api=True)},
        {"role": "user", "content": (
            _failure(error, structure, title, mode) + note + _facts(notes, mode) +
            "\nFind the cause and fix it with the smallest change. Do not remove "
            f"{'the idea, ' if title else ''}the training or the evaluation.\n"
            f"{GENERIC_RULES if generic else rules(code, entry_points)}\n"
            + instructions(edit_format, filename))},
    ]


def repeated_versions(attempt: int, current: bool, shown: list[tuple[str, str]]) -> str:
    """The note of the re-ask after a repeat: the last answer gave the version `attempt` ran
    (`current`: the code being fixed itself); `shown`: (diff against the current code, the error
    it ran into) of the versions already run, cut to their budget by the caller."""
    said = (f"\nYour last answer gives back the current code (run as attempt {attempt}) without a change to "
            "what it does, so it would fail again the same way." if current else
            f"\nYour last answer gives back a version of the file that was already run (attempt {attempt}), "
            "so running it again would only repeat that result.")
    listed = "".join(f"\nAlready run, as a change of the current code:\n{d}\nWith it, the script failed with: {e}\n"
                     for d, e in shown)
    return (said + listed + f"\n{DIFFERENT_CHANGE}: do not return any of these versions again; find the cause "
            "of the error in the code and change something else.")
