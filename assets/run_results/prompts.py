"""Debugging prompts (DOLPHIN 3.2), in three modes to reproduce the paper's Table 4:
- "structure": the traceback plus the local code structure (the source of the functions the
  error passed through); the model first writes its analysis of that structure (`analyse`),
  then fixes the error from the error, the structure and its analysis (`fix`);
- "traceback": the traceback only, fixed in one step;
- "error": only the final error line, fixed in one step."""
from assets.editing.edit_formats import instructions
from assets.editing.prompts import RULES, system_prompt

MODES = ("structure", "traceback", "error")

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
        {"role": "system", "content": system_prompt(code, filename)},
        {"role": "user", "content": _failure(error, structure, title, "structure") + _facts(notes, "structure") + (
            "\nDo not write code yet. In at most three short sentences, describe the error-related "
            "code structure: the lines the error passes through (marked '<-- error path'), what they "
            "expect there (shapes, types, names, devices), and which line causes the error and why.")},
    ]


def fix(code: str, filename: str, edit_format: str, error: str, structure: str, title: str,
        *, mode: str = "structure", analysis: str = "",
        generic: bool = False, notes: str = "", rejected: str = "", unhelpful: str = "") -> list[dict]:
    """Step 2 (or the only step): propose the fix, in `mode` (see experimenting.MODES); with
    `generic` (a plain script, not a topic) the rules speak of the script, not final_info.json.
    `rejected`: a fix of this code that broke the script; `unhelpful`: fixes after which it
    still failed with the same error (both were run and set aside by the repair search)."""
    note = f"\nAnalysis of the error:\n{analysis.strip()}\n" if mode == "structure" and analysis.strip() else ""
    if rejected.strip():
        note += ("\nThis fix was tried already and made things worse; do not propose it again:\n"
                 f"{rejected.strip()}\n")
    if unhelpful.strip():
        note += ("\nThis fix was tried already and the script still failed with the same error, so it "
                 f"missed the cause; find another one:\n{unhelpful.strip()}\n")
    return [
        {"role": "system", "content": system_prompt(code, filename)},
        {"role": "user", "content": (
            _failure(error, structure, title, mode) + note + _facts(notes, mode) +
            "\nFind the cause and fix it with the smallest change. Do not remove "
            f"{'the idea, ' if title else ''}the training or the evaluation.\n"
            f"{GENERIC_RULES if generic else RULES}\n"
            + instructions(edit_format, filename))},
    ]
