

SYSTEM = "You turn research ideas into precise, minimal code change plans for one Python file."


def plan(code: str, metric: str, name: str, title: str, experiment: str, summary: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM + f"\n\nThe file:\n```python\n{code}\n```"},
        {"role": "user", "content": (
            f"Idea {name}: {title}\n{summary}\nSuggested experiment: {experiment}\n\n"
            f"Write the plan: the concrete changes (1-4 items), where in the file (functions/classes), "
            f"how {metric} is evaluated (keep the script's evaluation and final_info.json unchanged), "
            "and the expected effect.")},
    ]
