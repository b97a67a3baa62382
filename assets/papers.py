"""papers and paper_rankings (DOLPHIN 3.1): retrieve, then rank by task attributes."""

import dagster as dg
import polars as pl
from pydantic import Field

from assets.checks import E, expectation_check
from assets.partitions import round_asset, round_key_of
from assets.prompts import ranking as prompts
from assets.ranking import (KEEP_AT, agreement, agreement_label, attribute_similarities, is_kept, score_attributes,
                            score_paper)
from assets.report import md_table, usage_metadata
from assets.topic import topic_spec
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import PaperAttributes, PaperJudgement, PaperRelevance, paper_batch
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


@round_asset(
    "papers_usable", "every paper has an id (unique), a title and an abstract",
    "Papers retrieved for the topic's search query from its literature source (corpus, dump, "
    "Semantic Scholar or OpenAlex).",
    topic_inputs=("topic_brief",),
)
def papers(context: dg.AssetExecutionContext, topic_brief: pl.DataFrame, literature: Literature,
           embedder: Embedder):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    brief = from_frame(topic_brief, TopicBrief)[0]
    source = literature.open(embedder, spec).describe()
    found = literature.search(brief.search_query, spec.budget.papers, embedder, spec)
    context.log.info(f"query {brief.search_query!r}: {len(found)} papers from {source}")
    df = to_frame(found, Paper)
    check = expectation_check("papers_usable", df, [
        E("ExpectColumnValuesToBeUnique", column="paper_id"),
        E("ExpectColumnValuesToNotBeNull", column="title"),
        E("ExpectColumnValueLengthsToBeBetween", column="abstract", min_value=1),
    ], asset_key="papers")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "query": brief.search_query, "count": len(found), "source": source,
        "papers": dg.MetadataValue.md(md_table([p.model_dump() for p in found],
                                               ["paper_id", "title", "year", "venue", "retrieval_score"])),
    })


class RankingConfig(dg.Config):
    mode: str = Field("attributes", description="attributes (task-attribute guided) | naive (relevance only, "
                      "DOLPHIN's baseline) | judged (the LLM grades attribute agreement itself)")
    batch: int = Field(0, ge=0, description="papers per LLM request; 0: 5 on the local model, 1 on a remote one")


@round_asset(
    "scores_consistent", "scores within 1-10 and kept exactly when score >= 8",
    "Per paper: relevance (LLM category) and task-attribute agreement (the paper's own task, input and "
    "output against the topic's), a 1-10 score, kept if >= 8.",
    topic_inputs=("topic_brief",),
)
def paper_rankings(context: dg.AssetExecutionContext, config: RankingConfig, papers: pl.DataFrame,
                   topic_brief: pl.DataFrame, llm: LLM, embedder: Embedder):
    brief = from_frame(topic_brief, TopicBrief)[0]
    items = from_frame(papers, Paper)
    n0 = len(llm.calls())
    scores = rank_papers(brief, items, llm, mode=config.mode, embedder=embedder, batch=config.batch or None)
    df = to_frame(scores, PaperScore)
    kept = [s for s in scores if s.kept]
    context.log.info(f"kept {len(kept)}/{len(scores)} papers (score >= {KEEP_AT}, mode {config.mode})")
    check = expectation_check("scores_consistent", df.with_columns(
        kept_matches_score=pl.col("kept") == (pl.col("score") >= KEEP_AT)), [
        E("ExpectColumnValuesToBeBetween", column="score", min_value=1, max_value=10),
        E("ExpectColumnValuesToBeInSet", column="kept_matches_score", value_set=[True]),
    ], asset_key="paper_rankings")
    rows = sorted((s.model_dump() for s in scores), key=lambda r: (not r["kept"], -r["score"]))
    columns = ["score", "kept", "relevance", "attribute_match", "title", "reason"]
    if config.mode == "attributes":
        columns[4:4] = ["paper_task", "paper_output"]
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "mode": config.mode, "kept": len(kept), "dropped": len(scores) - len(kept),
        "not_judged": sum(s.error is not None for s in scores),
        "rankings": dg.MetadataValue.md(md_table(rows, columns)),
        **usage_metadata(llm.calls()[n0:]),
    })
