"""Patching and debugging prompts for the edit formats (whole / search_replace / functions).
The search/replace and functions instructions carry a worked example: the small local model
follows a format only when it has seen one.

Debugging (DOLPHIN 3.2) has three modes, to reproduce the paper's Table 4:
- "structure": the traceback plus the local code structure (the source of the functions the
  error passed through); the model first writes its analysis of that structure (`analyse`),
  then fixes the error from the error, the structure and its analysis (`fix`);
- "traceback": the traceback only, fixed in one step;
- "error": only the final error line, fixed in one step."""

SR_EXAMPLE = '''Example. To change the learning rate and add dropout:
<<<<<<< SEARCH
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
=======
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
>>>>>>> REPLACE
<<<<<<< SEARCH
        self.head = nn.Linear(128, n_classes)
=======
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(128, n_classes)
>>>>>>> REPLACE
Remember: if you add a layer in __init__, also use it in forward (and the other way round).'''

RULES = ("Keep the command-line arguments, the data loading, the evaluation and the writing of "
         "final_info.json working exactly as they are. Keep the training time similar.")


FUNCTIONS_EXAMPLE = '''Example (for another file). To fix the loss line inside the training loop and the
model's forward method:
```python
loss = F.mse_loss(net(xb).squeeze(1), yb.float())

class Net(nn.Module):
    def forward(self, x):
        return self.head(self.body(x).flatten(1))
```'''

MODES = ("structure", "traceback", "error")


def format_instructions(edit_format: str, filename: str) -> str:
    if edit_format == "whole":
        return (f"Return the complete new {filename} in one ```python code block, "
                "with every line of the file, and nothing else.")
    if edit_format == "functions":
        return ("Return in one ```python code block only the code you change, each piece complete: "
                "a changed line (a whole statement) on its own, even if it sits inside a loop, or the "
                "complete new version of a function or class (in a class, the changed methods are "
                "enough), and any import you add. Do not repeat unchanged code.\n" + FUNCTIONS_EXAMPLE)
    return ("Return only SEARCH/REPLACE blocks. Each SEARCH part must copy lines exactly from the "
            "file; the REPLACE part holds the new lines.\n" + SR_EXAMPLE)


def _system(code: str, filename: str) -> str:
    return ("You are an expert PyTorch engineer who edits experiment code.\n\n"
            f"The current {filename}:\n```python\n{code}\n```")


GENERIC_RULES = ("Keep what the script does: its training, its evaluation and the results it writes. "
                 "Do not silence the error with try/except.")


def implement(code: str, filename: str, edit_format: str, title: str, summary: str, changes: list[str]) -> list[dict]:
    steps = "\n".join(f"- {c}" for c in changes)
    return [
        {"role": "system", "content": _system(code, filename)},
        {"role": "user", "content": (
            f"Implement this idea: {title}\n{summary}\nPlanned changes:\n{steps}\n\n{RULES}\n"
            + format_instructions(edit_format, filename))},
    ]


def _failure(error: str, structure: str, title: str, mode: str) -> str:
    """The shared head of the debugging prompts (same prefix: the server reuses its cache)."""
    what = f"The file implements the idea '{title}' but running it failed with" if title else "Running it failed with"
    where = (f"\nThe code the error passed through (local code structure):\n{structure}\n"
             if mode == "structure" and structure else "")
    return f"{what}:\n{error}\n{where}"


def _facts(notes: str, mode: str) -> str:
    """The notes on the error (assets/error_notes.py), "structure" mode only: checked by the tool,
    so they come last before the instructions, after the model's own analysis."""
    return f"\nFacts about this error, checked by the tool:\n{notes.strip()}\n" if mode == "structure" and notes.strip() else ""


def analyse(code: str, filename: str, error: str, structure: str, title: str = "", *, notes: str = "") -> list[dict]:
    """Step 1 of "structure" debugging: the model writes the error-related code structure."""
    return [
        {"role": "system", "content": _system(code, filename)},
        {"role": "user", "content": _failure(error, structure, title, "structure") + _facts(notes, "structure") + (
            "\nDo not write code yet. In at most three short sentences, describe the error-related "
            "code structure: the lines the error passes through (marked '<-- error path'), what they "
            "expect there (shapes, types, names, devices), and which line causes the error and why.")},
    ]


def fix(code: str, filename: str, edit_format: str, error: str, structure: str, title: str,
        with_structure: bool = True, *, mode: str | None = None, analysis: str = "",
        generic: bool = False, notes: str = "", rejected: str = "") -> list[dict]:
    """Step 2 (or the only step): propose the fix. `mode` overrides `with_structure`; with
    `generic` (a plain script, not a topic) the rules speak of the script, not final_info.json."""
    mode = mode or ("structure" if with_structure else "traceback")
    note = f"\nAnalysis of the error:\n{analysis.strip()}\n" if mode == "structure" and analysis.strip() else ""
    if rejected.strip():
        note += ("\nThis fix was tried already and made things worse; do not propose it again:\n"
                 f"{rejected.strip()}\n")
    return [
        {"role": "system", "content": _system(code, filename)},
        {"role": "user", "content": (
            _failure(error, structure, title, mode) + note + _facts(notes, mode) +
            "\nFind the cause and fix it with the smallest change. Do not remove "
            f"{'the idea, ' if title else ''}the training or the evaluation.\n"
            f"{GENERIC_RULES if generic else RULES}\n"
            + format_instructions(edit_format, filename))},
    ]
