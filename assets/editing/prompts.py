"""The prompt pieces every code-editing prompt shares (the implementation prompt of
assets/patched_code/prompts.py and the debugging prompts of assets/run_results/prompts.py): the
same system message keeps the prefix the server caches."""

RULES = ("Keep the command-line arguments, the data loading, the evaluation and the writing of "
         "final_info.json working exactly as they are. Keep the training time similar.")


def system_prompt(code: str, filename: str) -> str:
    return ("You are an expert PyTorch engineer who edits experiment code.\n\n"
            f"The current {filename}:\n```python\n{code}\n```")
