"""Patching and debugging prompts for both edit formats. The search/replace instructions carry
a worked example: the small local model applies blocks only when it has seen one."""

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


def format_instructions(edit_format: str, filename: str) -> str:
    if edit_format == "whole":
        return (f"Return the complete new {filename} in one ```python code block, "
                "with every line of the file, and nothing else.")
    return ("Return only SEARCH/REPLACE blocks. Each SEARCH part must copy lines exactly from the "
            "file; the REPLACE part holds the new lines.\n" + SR_EXAMPLE)


def _system(code: str, filename: str) -> str:
    return ("You are an expert PyTorch engineer who edits experiment code.\n\n"
            f"The current {filename}:\n```python\n{code}\n```")


def implement(code: str, filename: str, edit_format: str, title: str, summary: str, changes: list[str]) -> list[dict]:
    steps = "\n".join(f"- {c}" for c in changes)
    return [
        {"role": "system", "content": _system(code, filename)},
        {"role": "user", "content": (
            f"Implement this idea: {title}\n{summary}\nPlanned changes:\n{steps}\n\n{RULES}\n"
            + format_instructions(edit_format, filename))},
    ]


def fix(code: str, filename: str, edit_format: str, error: str, structure: str, title: str,
        with_structure: bool = True) -> list[dict]:
    where = (f"\nThe code the error passed through (local code structure):\n{structure}\n"
             if with_structure and structure else "")
    return [
        {"role": "system", "content": _system(code, filename)},
        {"role": "user", "content": (
            f"The file implements the idea '{title}' but running it failed with:\n{error}\n{where}\n"
            "Find the cause and fix it with the smallest change. Do not remove the idea, the "
            f"training or the evaluation.\n{RULES}\n" + format_instructions(edit_format, filename))},
    ]
