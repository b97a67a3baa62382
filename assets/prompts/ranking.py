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
