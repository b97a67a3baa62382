"""The prompt pieces every code-editing prompt shares (the implementation prompt of
assets/patched_code/prompts.py and the debugging prompts of assets/run_results/prompts.py): the
same system message keeps the prefix the server caches."""
from assets.shared.data_profile import code_stack

RULES = ("Keep the command-line arguments, the data loading, the evaluation and the writing of "
         "final_info.json working exactly as they are. Keep the training time similar.")


def system_prompt(code: str, filename: str) -> str:
    # the role follows the file's own libraries (scikit-learn, NumPy, plain Python, PyTorch...)
    return (f"You are an expert Python engineer who edits experiment code. The file is written in "
            f"{code_stack(code)}: prefer the libraries it already uses, never switch it to another framework.\n\n"
            f"The current {filename}:\n```python\n{code}\n```")
