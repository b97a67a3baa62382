SYSTEM = ("You check whether a proposed research idea is novel with respect to given papers. "
          "An idea is not novel only if one of the papers already does essentially the same thing "
          "for the same task.")


def judge(idea_title: str, idea_summary: str, papers: list[tuple[int, str, str]]) -> list[dict]:
    refs = "\n".join(f"[{i}] {t}: {s}" for i, t, s in papers) or "(no related papers found)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Idea: {idea_title}\n{idea_summary}\n\nPapers:\n{refs}\n\n"
            "Decide novel or not_novel, name the closest paper's number (0 if none) and give a short reason.")},
    ]
