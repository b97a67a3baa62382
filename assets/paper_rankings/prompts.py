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
