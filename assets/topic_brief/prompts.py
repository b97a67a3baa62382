

SYSTEM = "You are a careful machine learning researcher. Answer in JSON only."


def task_attributes(title: str, description: str, metric: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Research topic: {title}\n{description.strip()}\nPrimary metric: {metric}\n\n"
            "Describe the task's attributes: the task itself, the model's input, its output, "
            "the research field, how results are evaluated, and a short search query "
            "(4-8 words) to find papers on exactly this task.")},
    ]
