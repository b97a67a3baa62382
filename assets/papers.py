"""papers and paper_rankings (DOLPHIN 3.1): retrieve, then rank by task attributes."""

import dagster as dg
import polars as pl

from assets.checks import E, expectation_check
from assets.partitions import round_asset, round_key_of
from assets.prompts import ranking as prompts
from assets.ranking import KEEP_AT, is_kept, score_paper
from assets.report import md_table, usage_metadata
from assets.topic import topic_spec
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import PaperJudgement
from schemas.records import Paper, PaperScore, TopicBrief


def rank_papers(brief: TopicBrief, papers: list[Paper], llm: LLM, with_attributes: bool = True) -> list[PaperScore]:
    """Judge each paper by categories and build the 1-10 score (keep >= 8)."""
    topic = prompts.topic_block(brief.task, brief.input, brief.output, brief.domain)

    def one(p: Paper) -> PaperScore:
        res = llm.complete(prompts.judge_paper(topic, p.title, p.abstract, with_attributes),
                           stage="paper_rankings", schema=PaperJudgement, max_tokens=200)
        if not res.ok:
            return PaperScore(paper_id=p.paper_id, title=p.title, relevance="unknown", attribute_match="unknown",
                              score=1, kept=False, reason="not judged", error=res.error)
        j: PaperJudgement = res.value
        score = score_paper(j.relevance, j.attribute_match if with_attributes else None)
        return PaperScore(paper_id=p.paper_id, title=p.title, relevance=j.relevance,
                          attribute_match=j.attribute_match if with_attributes else "n/a",
                          score=score, kept=is_kept(score), reason=f"[{j.paper_task}] {j.reason}")

    return llm.map(one, papers)


@round_asset(
    "papers_usable", "every paper has an id (unique), a title and an abstract",
    "Papers retrieved for the topic's search query (hybrid BM25 + embeddings).",
    topic_inputs=("topic_brief",),
)
def papers(context: dg.AssetExecutionContext, topic_brief: pl.DataFrame, literature: Literature,
           embedder: Embedder):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    brief = from_frame(topic_brief, TopicBrief)[0]
    found = literature.search(brief.search_query, spec.budget.papers, embedder)
    context.log.info(f"query {brief.search_query!r}: {len(found)} papers from {literature.corpus_path()}")
    df = to_frame(found, Paper)
    check = expectation_check("papers_usable", df, [
        E("ExpectColumnValuesToBeUnique", column="paper_id"),
        E("ExpectColumnValuesToNotBeNull", column="title"),
        E("ExpectColumnValueLengthsToBeBetween", column="abstract", min_value=1),
    ], asset_key="papers")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "query": brief.search_query, "count": len(found), "source": str(literature.corpus_path()),
        "papers": dg.MetadataValue.md(md_table([p.model_dump() for p in found],
                                               ["paper_id", "title", "year", "venue", "retrieval_score"])),
    })


@round_asset(
    "scores_consistent", "scores within 1-10 and kept exactly when score >= 8",
    "Per paper: relevance and task-attribute match (categories), a 1-10 score, kept if >= 8.",
    topic_inputs=("topic_brief",),
)
def paper_rankings(context: dg.AssetExecutionContext, papers: pl.DataFrame, topic_brief: pl.DataFrame,
                   llm: LLM):
    brief = from_frame(topic_brief, TopicBrief)[0]
    items = from_frame(papers, Paper)
    n0 = len(llm.calls())
    scores = rank_papers(brief, items, llm)
    df = to_frame(scores, PaperScore)
    kept = [s for s in scores if s.kept]
    context.log.info(f"kept {len(kept)}/{len(scores)} papers (score >= {KEEP_AT})")
    check = expectation_check("scores_consistent", df.with_columns(
        kept_matches_score=pl.col("kept") == (pl.col("score") >= KEEP_AT)), [
        E("ExpectColumnValuesToBeBetween", column="score", min_value=1, max_value=10),
        E("ExpectColumnValuesToBeInSet", column="kept_matches_score", value_set=[True]),
    ], asset_key="paper_rankings")
    rows = sorted((s.model_dump() for s in scores), key=lambda r: -r["score"])
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "kept": len(kept), "dropped": len(scores) - len(kept), "not_judged": sum(s.error is not None for s in scores),
        "rankings": dg.MetadataValue.md(md_table(rows, ["score", "kept", "relevance", "attribute_match", "title", "reason"])),
        **usage_metadata(llm.calls()[n0:]),
    })
