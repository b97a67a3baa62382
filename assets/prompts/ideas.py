"""Idea generation (DOLPHIN 3.1, its Fig. 5 in spirit): references, the code, the ideas tried
before and the ideas that worked."""

SYSTEM = ("You are an ambitious but practical ML researcher. You propose small, concrete "
          "changes to an existing experiment that could improve its main metric, and which "
          "can be implemented by editing one short Python file.")


def generate(title: str, description: str, metric: str, goal: str, code: str, papers: list[tuple[int, str, str]],
             earlier: list[str], effective: list[str], n: int, analysis: str = "") -> list[dict]:
    refs = "\n".join(f"[{i}] {t}: {s}" for i, t, s in papers) or "(none)"
    before = "\n".join(f"- {e}" for e in earlier) or "(none yet)"
    good = "\n".join(f"- {e}" for e in effective) or "(none yet)"
    extra = f"\nWhat the last round taught us: {analysis}\n" if analysis else ""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Task: {title}\n{description.strip()}\nWe want to {goal} {metric}.\n\n"
            f"The experiment code:\n```python\n{code}\n```\n\n"
            f"Reference papers:\n{refs}\n\n"
            f"Ideas already tried (do not repeat them):\n{before}\n\n"
            f"Ideas that improved the result (you may build on them):\n{good}\n{extra}\n"
            f"Propose {n} different ideas. For each give Name (short snake_case), Title, "
            "Experiment (which part of the code to change and how), Summary (2-3 sentences) "
            "and References (numbers of the papers that inspired it, may be empty). Each idea "
            "must be implementable in this file within the same training time.")},
    ]
