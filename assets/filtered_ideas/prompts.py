"""The novelty check (DOLPHIN 3.1, run the AI-Scientist way): the model writes a search query
for the idea, reads what the search found, and either decides or asks for one more search.
The conversation only grows at its end, so the server's prefix cache reuses every earlier turn."""


SYSTEM = ("You check whether a proposed change to a machine-learning experiment has already been "
          "published. You search a paper database with short keyword queries, read the results and "
          "decide. An idea is not novel only if one paper already does essentially the same thing "
          "for the same kind of task; a related method or a different task does not count.")


DECIDE = ("give the number of the closest paper (0 if none is close), say in one short sentence "
          "how it differs from the idea or that it does the same thing, then decide novel or not_novel.")


def start(task: str, idea_title: str, idea_summary: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Research task: {task}\n\nIdea: {idea_title}\n{idea_summary}\n\n"
            "Write one short search query (a few keywords) that would find a paper doing this idea.")},
    ]


def results(query: str, papers: list[tuple[int, str, str]], final: bool) -> dict:
    """A user turn showing one search's results; a paper shown before is listed by number only
    (its summary is already in the conversation)."""
    lines = [f"[{i}] {t}" + (f": {s}" if s else " (shown above)") for i, t, s in papers]
    shown = "\n".join(lines) or "(no papers found)"
    ask = ("Now " + DECIDE) if final else (
        "If these papers settle it, " + DECIDE + " If they do not, decide search_again and give a "
        "different query.")
    return {"role": "user", "content": f"Search results for \"{query}\":\n{shown}\n\n{ask}"}


def repeated_query(query: str) -> dict:
    what = f"The query \"{query}\" was already searched" if query else "The query was empty"
    return {"role": "user", "content": f"{what}. Now " + DECIDE}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}
