"""The request for one implementation task: the signature and the description in words, nothing
of the ground truth. The answer is one fenced Python block (parsed by the loop's "whole" edit
format, assets/editing/edit_formats/whole.py)."""

SYSTEM = ("You are a careful machine-learning engineer. You implement what a description says "
          "exactly, in plain PyTorch, and return only code.")


def implement(signature: str, description: str, entry: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Implement this in Python with PyTorch.\n\nSignature:\n{signature}\n\n"
            f"What it computes:\n{description.strip()}\n\n"
            f"Return one ```python code block with the imports and the complete definition of `{entry}`, "
            "and nothing else: no tests, no example usage, no printing.")},
    ]
