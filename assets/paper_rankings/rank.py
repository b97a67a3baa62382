"""Ranking papers with the LLM: a yes/no judgement read from token log-probabilities, the
abstract's embedding similarity to the topic, their combination, and (older modes) relevance
categories and the papers' own task attributes."""
from collections import Counter
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from assets.paper_rankings import prompts
from assets.paper_rankings.scoring import (
    CENTRED,
    COMBINED_WEIGHT,
    agreement,
    agreement_label,
    attribute_similarities,
    copied_fields,
    graded_score,
    is_kept,
    score_attributes,
    score_paper,
    signal_threshold,
    signal_values,
    yes_probability,
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

MODES = ("combined", "yesno", "similarity", "attributes", "naive", "judged")
SIGNAL_MODES = ("combined", "yesno", "similarity")   # scored from P(yes) and / or the abstract similarity
DEFAULT_MODE = "similarity"   # chosen by leave-one-topic-out (bench/RESULTS.md "ranking (LOTO)"): the only mode
                              # with held-out macro recall >= 0.6; none reached precision 0.8


ABSTRACT_CHARS = 1500   # a paper's task is stated early; bounds the prompt of a batch


LOCAL_BATCH = 5         # papers per attribute request on the local model (bench/ranking_bench.py)


YES_NO_ABSTRACT_CHARS = 600   # the yes/no request reads the abstract's opening only: the task is stated
                              # there, and each request then costs ~150 prompt tokens beyond the cached prefix


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


def opening(text: str, chars: int) -> str:
    """The first `chars` characters of a text, cut after the last full sentence (else the last
    whole word) that fits."""
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    head = text[:chars]
    end = head.rfind(". ")
    return head[:end + 1] if end >= chars // 3 else head.rsplit(" ", 1)[0]


def yes_no_probabilities(brief: TopicBrief, papers: list[Paper], llm: LLM, on_done=None) -> list[float | str]:
    """Per paper, P(yes) that it is relevant to the topic (scoring.yes_probability over the first
    answer token's log-probabilities), or the error text. One request of one answer token per paper;
    the topic is the shared system message, so the local server evaluates it once."""
    system = prompts.yes_no_system(brief.title, brief.description)

    def one(p: Paper) -> float | str:
        res = llm.complete(prompts.yes_no_question(system, p.title, opening(p.abstract, YES_NO_ABSTRACT_CHARS)),
                           stage="paper_rankings", max_tokens=1, max_retries=0, top_logprobs=10)
        if on_done:
            on_done(1)
        if not res.ok:
            return res.error or "no answer"
        prob = yes_probability(res.top_logprobs, res.text)
        return prob if prob is not None else f"answered neither yes nor no: {res.text[:40]!r}"

    return llm.map(one, papers)


def abstract_similarities(brief: TopicBrief, papers: list[Paper], embedder: Embedder) -> list[float]:
    """Cosine between the topic (title and description) and each paper's title and abstract."""
    if not papers:
        return []
    vecs = embedder.encode([prompts.topic_text(brief.title, brief.description)]
                           + [f"{p.title}. {p.abstract}" for p in papers])
    return [round(float(vecs[0] @ v), 4) for v in vecs[1:]]


def signal_reason(mode: str, p_yes: float | None, similarity: float | None, value: float, centred: bool) -> str:
    parts = [f"P(yes) {p_yes:.2f}" if p_yes is not None else "", f"abstract similarity {similarity:.2f}"
             if similarity is not None else ""]
    what = ", ".join(x for x in parts if x)
    if mode == "combined":
        what += f" (P(yes) weighs {COMBINED_WEIGHT})"
    scale = f"{mode} value" + (" centred on the papers ranked together" if centred else "")
    return f"{what}: {scale} {value:.2f}, kept from {signal_threshold(mode)}"


def rank_by_signals(brief: TopicBrief, papers: list[Paper], llm: LLM, mode: str, embedder: Embedder | None = None,
                    on_done=None) -> list[PaperScore]:
    """modes yesno / similarity / combined (scoring.signal_values; centred on the papers ranked
    together when scoring.CENTRED)."""
    probs = yes_no_probabilities(brief, papers, llm, on_done) if mode != "similarity" else [None] * len(papers)
    sims = (abstract_similarities(brief, papers, embedder or Embedder()) if mode != "yesno"
            else [None] * len(papers))
    if mode == "similarity" and on_done:
        on_done(len(papers))
    judged = [i for i, prob in enumerate(probs) if not isinstance(prob, str)]
    # an endpoint without log-probabilities answers P(yes) 1 or 0: its yes or no decides (the
    # thresholds and the weight were tuned on graded probabilities)
    graded = mode == "similarity" or any(0.0 < probs[i] < 1.0 for i in judged)
    centred = CENTRED[mode] and graded
    values = dict(zip(judged, signal_values(mode, [probs[i] for i in judged], [sims[i] for i in judged],
                                            centred=centred) if graded else [probs[i] for i in judged]))
    out = []
    for i, (p, prob, sim) in enumerate(zip(papers, probs, sims)):
        if isinstance(prob, str):
            out.append(_not_judged(p, mode, prob))
            continue
        score = graded_score(values[i], signal_threshold(mode) if graded else 0.5)
        relevance = "n/a" if prob is None else "yes" if prob >= 0.5 else "no"
        reason = (signal_reason(mode, prob, sim, values[i], centred) if graded else
                  f"P(yes) {prob:.0f}: answered {relevance} (the endpoint gave no log-probabilities)")
        out.append(PaperScore(paper_id=p.paper_id, title=p.title, relevance=relevance, attribute_match="n/a",
                              score=score, kept=is_kept(score), reason=reason,
                              mode=mode))
    return out


# -- the papers' own task attributes, tied to their paper by id ------------------------------------

ATTRIBUTE_TOKENS = 90   # answer tokens per paper (id, task, input, output)


@cache
def attributes_schema(ids: tuple[str, ...]) -> type[BaseModel]:
    """The answer for the papers `ids`: one item per paper, each naming the id it describes (the
    grammar allows only these ids). One paper: the item itself."""
    fields = {"id": (Literal[ids], Field(description="the id of the paper this answer describes"))}
    for name, f in PaperAttributes.model_fields.items():
        fields[name] = (str, Field(max_length=60, description=f.description))
    item = create_model("PaperAttributesById", __config__=ConfigDict(extra="forbid"), **fields)
    if len(ids) == 1:
        return item
    return create_model("PaperAttributesByIdBatch", __config__=ConfigDict(extra="forbid"),
                        papers=(list[item], Field(min_length=len(ids), max_length=len(ids))))


def unusable(p: Paper, answer: dict, batch: list[Paper]) -> str | None:
    """Why an attribute answer cannot be used for paper p: it copies the paper's title or the
    abstract's opening, or it copies another paper of the same request (an answer under the wrong
    id); None when it is usable."""
    copies = copied_fields(answer, p.title, p.abstract)
    if copies:
        return "copies " + ", ".join(f"{a} = {src}" for a, src in copies.items())
    for q in batch:
        if q.paper_id != p.paper_id and copied_fields(answer, q.title, q.abstract).keys() - {"output"}:
            return f"describes paper {q.paper_id}"
    return None


def ask_attributes(papers: list[Paper], llm: LLM, batch: int, on_done=None,
                   trace: dict | None = None) -> list[PaperAttributes | str]:
    """Each paper's own task / input / output, or why there is none. `batch` papers per request;
    answers are matched to papers by the id they name. A paper with no answer under its id (or two),
    or whose answer is a copy (`unusable`), is asked once more alone (a copy with a request to use
    its own words); an answer that is still a copy is dropped. `trace` (a dict, optional) receives per
    paper id what happened: {"first": the first answer (dict) or None, "first_problem": why it was not
    used (the paper was then asked again) or None, "again": the second answer or None, "again_problem":
    why it was not used or None} (what bench/records/ranking_attributes.json holds per paper)."""

    def ask(chunk: list[Paper], again: bool = False) -> dict[str, dict] | str:
        ids = tuple(p.paper_id for p in chunk)
        res = llm.complete(prompts.attributes_batch([(p.paper_id, p.title, p.abstract[:ABSTRACT_CHARS])
                                                     for p in chunk], again=again),
                           stage="paper_rankings", schema=attributes_schema(ids),
                           max_tokens=30 + ATTRIBUTE_TOKENS * len(chunk))
        if not res.ok:
            return res.error or "no answer"
        items = list(res.value.papers) if len(chunk) > 1 else [res.value]
        named = Counter(it.id for it in items)
        return {it.id: it.model_dump(exclude={"id"}) for it in items if named[it.id] == 1}

    chunks = [papers[i:i + batch] for i in range(0, len(papers), max(1, batch))]
    out: dict[str, PaperAttributes | str] = {}
    retry: list[tuple[Paper, str]] = []
    for chunk, got in zip(chunks, llm.map(ask, chunks)):
        for p in chunk:
            answer = got.get(p.paper_id) if isinstance(got, dict) else None
            problem = (got if isinstance(got, str) else "no answer under its id") if answer is None else \
                unusable(p, answer, chunk)
            if trace is not None:
                trace[p.paper_id] = {"first": answer, "first_problem": problem, "again": None, "again_problem": None}
            if problem is None:
                out[p.paper_id] = PaperAttributes(**answer)
                if on_done:
                    on_done(1)
            else:
                retry.append((p, problem))

    def ask_again(item: tuple[Paper, str]) -> PaperAttributes | str:
        p, first = item
        got = ask([p], again=first.startswith("copies") or first.startswith("describes"))
        if on_done:
            on_done(1)
        problem = got if isinstance(got, str) else unusable(p, got[p.paper_id], [p])
        if trace is not None:
            trace[p.paper_id].update({"again": None if isinstance(got, str) else got[p.paper_id],
                                      "again_problem": problem})
        if isinstance(got, str):
            return got
        return PaperAttributes(**got[p.paper_id]) if problem is None else \
            f"attributes dropped: {problem} (asked twice; first answer {first})"

    for (p, _), again in zip(retry, llm.map(ask_again, retry)):
        out[p.paper_id] = again
    return [out[p.paper_id] for p in papers]


def rank_papers(brief: TopicBrief, papers: list[Paper], llm: LLM, mode: str = DEFAULT_MODE,
                embedder: Embedder | None = None, batch: int | None = None, relevance_batch: int = RELEVANCE_BATCH,
                on_done=None) -> list[PaperScore]:
    """Score each paper 1-10 and keep >= 8 (DOLPHIN 3.1). Modes:
    - similarity (default): the cosine between the topic and the abstract, centred on the papers
      given (no LLM call);
    - yesno: P(yes) of a yes/no relevance question, read from the first answer token's
      log-probabilities; combined: P(yes) and the similarity, weighted;
    - attributes: the LLM judges each paper's relevance to the topic (a category) and, in a
      second pass that does not show the topic, names the paper's own task / input / output (tied
      to the paper by id, copies of the title or abstract asked again, then dropped); the code
      compares those with the topic's (embeddings) and builds the score from both;
    - naive: the relevance category alone (DOLPHIN's baseline);
    - judged: the LLM judges relevance and attribute agreement itself, one paper per request.
    `batch`: papers per request of the attribute pass (default_batch); `relevance_batch`: of the
    relevance pass. `on_done(n)` is called as papers are answered (progress; the attribute mode
    counts each paper twice, once per pass)."""
    if mode not in MODES:
        raise ValueError(f"unknown ranking mode {mode!r}; one of {MODES}")
    if not papers:
        return []
    if mode in SIGNAL_MODES:
        return rank_by_signals(brief, papers, llm, mode, embedder, on_done)
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
    for i, a in zip(ok, ask_attributes([papers[i] for i in ok], llm, batch, on_done)):
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
