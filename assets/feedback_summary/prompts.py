"""The round's analysis (DOLPHIN 3.3 feeds results back): what worked, what did not, and why,
in a few sentences the next round's idea prompt can use."""


SYSTEM = ("You review the results of one round of automated ML experiments and explain them "
          "briefly and concretely, so the next round proposes better ideas.")


def analyse(title: str, metric: str, goal: str, baseline: float, rows: list[tuple[str, str, str, str]]) -> list[dict]:
    """rows: (idea title, summary, verdict, result) per idea."""
    lines = "\n".join(f"- {t}: {s}\n  verdict: {v}; {r}" for t, s, v, r in rows) or "(no ideas were run)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Task: {title}. We want to {goal} {metric}; the baseline scores {baseline:.4g}.\n\n"
            f"Ideas tried this round and their outcome:\n{lines}\n\n"
            "Say what worked and why it likely helped, what did not and why, and one direction for the "
            "next round. Be specific to these ideas; no generic advice.")},
    ]
