"""Ranking papers with the LLM: relevance categories and the papers' own task attributes."""
from assets.paper_rankings import prompts
from assets.paper_rankings.scoring import (
    agreement,
    agreement_label,
    attribute_similarities,
    is_kept,
    score_attributes,
    score_paper,
)
from resources.embedder import Embedder
from resources.llm import LLM
from schemas.llm_outputs import (
    PaperAttributes,
    PaperJudgement,
    PaperRelevance,
    paper_batch,
)
from schemas.records import Paper, PaperScore, TopicBrief

MODES = ("attributes", "naive", "judged")


ABSTRACT_CHARS = 1500   # a paper's task is stated early; bounds the prompt of a batch


LOCAL_BATCH = 5         # papers per attribute request on the local model (bench/ranking_bench.py)


RELEVANCE_BATCH = 1     # measured: asked for 5 papers at once, the 1.5B model sometimes lists the scale
                        # in order (same_task, neighbouring_task, same_field_other_task, unrelated, ...)


def default_batch(llm: LLM) -> int:
    """Papers per request of the attribute pass: several on the local server (one slot: fewer,
    longer requests reuse the shared prefix); one on a remote endpoint, where calls run
    concurrently."""
    return LOCAL_BATCH if llm.is_local() else 1


def _judge_each(brief: TopicBrief, papers: list[Paper], llm: LLM, on_done=None) -> list[PaperScore]:
    """mode "judged": the LLM itself judges relevance and input/output agreement, one paper per
    request (the first design; kept for comparison)."""
    topic = prompts.topic_block(brief.task, brief.input, brief.output, brief.domain)

    def one(p: Paper) -> PaperScore:
        res = llm.complete(prompts.judge_paper(topic, p.title, p.abstract[:ABSTRACT_CHARS]),
                           stage="paper_rankings", schema=PaperJudgement, max_tokens=200)
        if on_done:
            on_done(1)
        if not res.ok:
            return _not_judged(p, "judged", res.error)
        j: PaperJudgement = res.value
        score = score_paper(j.relevance, j.attribute_match)
        return PaperScore(paper_id=p.paper_id, title=p.title, relevance=j.relevance, attribute_match=j.attribute_match,
                          score=score, kept=is_kept(score), reason=f"[{j.paper_task}] {j.reason}", mode="judged",
                          paper_task=j.paper_task)

    return llm.map(one, papers)


def _not_judged(p: Paper, mode: str, error: str | None) -> PaperScore:
    return PaperScore(paper_id=p.paper_id, title=p.title, relevance="unknown", attribute_match="unknown",
                      score=1, kept=False, reason=f"not judged: {(error or '')[:200]}", error=error, mode=mode)


def ask_in_batches(system: str, papers: list[Paper], item, llm: LLM, batch: int, on_done=None) -> list:
    """One answer per paper (an `item` model) or the error text: `batch` papers per request, the
    requests through llm.map (concurrent on remote endpoints). A batch whose answer stays invalid
    after the retries is asked again paper by paper, so one bad answer costs no other paper."""
    per_paper = 80 if item is PaperAttributes else 20

    def ask(chunk: list[Paper]) -> list:
        # one paper: the item itself, without the list around it (the small model pretty-prints
        # JSON, so the wrapper alone costs ~18 decoded tokens)
        res = llm.complete(prompts.judge_batch(system, [(p.title, p.abstract[:ABSTRACT_CHARS]) for p in chunk]),
                           stage="paper_rankings", schema=paper_batch(item, len(chunk)) if len(chunk) > 1 else item,
                           max_tokens=30 + per_paper * len(chunk))
        if res.ok:
            if on_done:
                on_done(len(chunk))
            return list(res.value.papers) if len(chunk) > 1 else [res.value]
        if len(chunk) > 1:
            return [a for p in chunk for a in ask([p])]
        if on_done:
            on_done(1)
        return [res.error or "no answer"]

    chunks = [papers[i:i + batch] for i in range(0, len(papers), max(1, batch))]
    return [a for answers in llm.map(ask, chunks) for a in answers]


def rank_papers(brief: TopicBrief, papers: list[Paper], llm: LLM, mode: str = "attributes",
                embedder: Embedder | None = None, batch: int | None = None, relevance_batch: int = RELEVANCE_BATCH,
                on_done=None) -> list[PaperScore]:
    """Score each paper 1-10 and keep >= 8 (DOLPHIN 3.1). Modes:
    - attributes (default): the LLM judges each paper's relevance to the topic (a category) and, in a
      second pass that does not show the topic, names the paper's own task / input / output; the
      code compares those with the topic's (embeddings) and builds the score from both;
    - naive: the relevance category alone (DOLPHIN's baseline);
    - judged: the LLM judges relevance and attribute agreement itself, one paper per request.
    `batch`: papers per request of the attribute pass (default_batch); `relevance_batch`: of the
    relevance pass. `on_done(n)` is called as papers are answered (progress; the attribute mode
    counts each paper twice, once per pass)."""
    if mode not in MODES:
        raise ValueError(f"unknown ranking mode {mode!r}; one of {MODES}")
    if not papers:
        return []
    if mode == "judged":
        return _judge_each(brief, papers, llm, on_done)
    batch = batch or default_batch(llm)
    relevance = ask_in_batches(prompts.relevance_system(brief.title, brief.description), papers, PaperRelevance,
                               llm, relevance_batch, on_done)
    if mode == "naive":
        out = []
        for p, r in zip(papers, relevance):
            if isinstance(r, str):
                out.append(_not_judged(p, mode, r))
                continue
            score = score_paper(r.relevance, None)
            out.append(PaperScore(paper_id=p.paper_id, title=p.title, relevance=r.relevance, attribute_match="n/a",
                                  score=score, kept=is_kept(score), reason=f"relevance {r.relevance}", mode=mode))
        return out
    ok = [i for i, r in enumerate(relevance) if not isinstance(r, str)]   # a failed paper is not asked again
    attrs: list = [None] * len(papers)
    for i, a in zip(ok, ask_in_batches(prompts.ATTRIBUTES_SYSTEM, [papers[i] for i in ok], PaperAttributes, llm,
                                       batch, on_done)):
        attrs[i] = a
    if on_done and len(ok) < len(papers):
        on_done(len(papers) - len(ok))
    judged = [a for r, a in zip(relevance, attrs) if not isinstance(r, str) and not isinstance(a, str)]
    sims = iter(attribute_similarities({"task": brief.task, "input": brief.input, "output": brief.output},
                                       [a.model_dump() for a in judged], (embedder or Embedder()).encode))
    out = []
    for p, r, a in zip(papers, relevance, attrs):
        if isinstance(r, str) or isinstance(a, str):
            out.append(_not_judged(p, mode, r if isinstance(r, str) else a))
            continue
        s = next(sims)
        levels = agreement(s)
        score = score_attributes(r.relevance, levels)
        reason = (f"{r.relevance}; task '{a.task}' {levels['task']} ({s['task']:.2f}), "
                  f"output '{a.output}' {levels['output']} ({s['output']:.2f}), input {levels['input']} "
                  f"({s['input']:.2f})")
        out.append(PaperScore(paper_id=p.paper_id, title=p.title, relevance=r.relevance,
                              attribute_match=agreement_label(levels), score=score, kept=is_kept(score),
                              reason=reason, mode=mode, paper_task=a.task, paper_input=a.input, paper_output=a.output,
                              task_similarity=s["task"], input_similarity=s["input"], output_similarity=s["output"]))
    return out
