"""Judging one paper against the topic's task attributes. The topic block comes first and is
identical for every paper, so the server reuses its prefix cache."""


SYSTEM = ("You judge whether a research paper is useful for a given research task. "
          "Be strict: a paper on a different task is not the same task even if it uses similar data.")


def topic_block(task: str, input_: str, output: str, domain: str) -> str:
    return (f"Our task: {task}\nOur input: {input_}\nOur output: {output}\nOur field: {domain}\n")


def judge_paper(topic: str, title: str, abstract: str, with_attributes: bool = True) -> list[dict]:
    steps = ("First name the paper's own task. Then decide relevance: same_task (it solves our task), "
             "neighbouring_task (a different task on the same kind of data), same_field_other_task, "
             "or unrelated.")
    if with_attributes:
        steps += (" Then compare the paper's input and output with ours: input_and_output_match, "
                  "only_input_matches, only_output_matches or neither_matches.")
    return [
        {"role": "system", "content": SYSTEM + "\n\n" + topic},
        {"role": "user", "content": f"Paper: {title}\n{abstract}\n\n{steps} Give a one-sentence reason."},
    ]


# -- batched prompts (several papers per request). The system message is identical for every
# request of a pass, so llama.cpp's prefix cache reads it once; the papers follow in the user
# message, numbered, and the answer lists them in the same order.

RELEVANCE_SCALE = ("same_task (it solves our task, or proposes a method evaluated on it), "
                   "neighbouring_task (a different task on the same kind of data), "
                   "same_field_other_task, or unrelated")


# no topic here: the answer describes the paper alone (a small model otherwise copies our task
# into its answer), and it can be reused for any topic
ATTRIBUTES_SYSTEM = ("You read research papers. For each paper, write the task it addresses, the input "
                     "its model receives and the output its model predicts, a few words each, in the "
                     "paper's own terms.")


def relevance_system(title: str, description: str) -> str:
    return (f"You judge how relevant research papers are to our research topic: {RELEVANCE_SCALE}."
            f"\n\nOur topic: {title}\n{description.strip()}\n")


def papers_block(papers: list[tuple[str, str]]) -> str:
    """(title, abstract) pairs, numbered from 1."""
    return "\n\n".join(f"Paper {i}: {t}\n{a.strip()}" for i, (t, a) in enumerate(papers, 1))


def judge_batch(system: str, papers: list[tuple[str, str]]) -> list[dict]:
    n = len(papers)
    ask = ("Answer for this paper." if n == 1 else
           f"Answer for each of the {n} papers, in the order given, one item per paper.")
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"{papers_block(papers)}\n\n{ask}"}]


# -- yes/no relevance read from the first answer token's log-probabilities. Everything about the
# topic sits in the system message, identical for every paper, so the server evaluates it once and
# each request adds only the paper and the fixed question (about 150 tokens with a shortened abstract).

YES_NO_QUESTION = "Is this paper relevant to our task? Answer yes or no."


def yes_no_system(title: str, description: str) -> str:
    """The topic in its own words (title and description; not the task attributes the LLM extracted,
    so a poor extraction cannot mislead the judgement)."""
    return ("You decide whether a research paper is relevant to our research task. A paper is relevant when "
            "its method addresses our task on our kind of data, so that it could directly improve our model. "
            "A paper on a different task with the same kind of data is not relevant, and neither is a paper "
            "on our task for a different kind of data.\n\n"
            f"Our task: {title}\n{' '.join(description.split())}")


def yes_no_question(system: str, title: str, abstract: str) -> list[dict]:
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Paper: {title}\n{abstract.strip()}\n\n{YES_NO_QUESTION}"}]


def topic_text(title: str, description: str) -> str:
    """What the topic's embedding is computed from (the similarity mode)."""
    return f"{title}. {' '.join(description.split())}"


# -- attribute answers tied to their paper by id: each paper is shown with its id and each answer
# names the id it is for (the schema allows only the ids of the request), so an answer is matched
# to its paper by id, never by its place in the list.

def papers_block_with_ids(papers: list[tuple[str, str, str]]) -> str:
    """(id, title, abstract) triples."""
    return "\n\n".join(f"[id {i}] {t}\n{a.strip()}" for i, t, a in papers)


def attributes_batch(papers: list[tuple[str, str, str]], again: bool = False) -> list[dict]:
    n = len(papers)
    ask = ("Answer for this paper, with its id." if n == 1 else
           f"Answer for each of the {n} papers: one item per paper, with the id of the paper it describes.")
    if again:   # the first answer repeated the paper's title or abstract
        ask += (" Describe the task, the input and the output in your own few words: do not repeat the "
                "title or sentences of the abstract.")
    return [{"role": "system", "content": ATTRIBUTES_SYSTEM},
            {"role": "user", "content": f"{papers_block_with_ids(papers)}\n\n{ask}"}]
