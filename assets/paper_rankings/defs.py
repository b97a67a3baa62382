"""paper_rankings (DOLPHIN 3.1): score the retrieved papers 1-10 for the topic and keep >= 8."""
import dagster as dg
import polars as pl
from pydantic import Field

from assets.paper_rankings.methods import with_method_papers
from assets.paper_rankings.rank import DEFAULT_MODE, SIGNAL_MODES, rank_papers
from assets.paper_rankings.scoring import KEEP_AT
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, usage_metadata
from assets.shared.partitions import round_asset
from assets.shared.topics import captured
from resources.embedder import Embedder
from resources.llm import LLM
from schemas.frames import from_frame, to_frame
from schemas.records import Paper, PaperScore, TopicBrief
from schemas.topic import IdeationSpec


class RankingConfig(dg.Config):
    mode: str = Field(DEFAULT_MODE, description="combined (P(yes) of a yes/no question from token log-probabilities "
                      "+ abstract similarity) | yesno | similarity | attributes (task-attribute guided) | naive "
                      "(relevance only, DOLPHIN's baseline) | judged (the LLM grades attribute agreement itself)")
    batch: int = Field(0, ge=0, description="papers per LLM request; 0: 5 on the local model, 1 on a remote one")


@round_asset(
    "scores_consistent", "scores within 1-10 and kept exactly when score >= 8",
    "Per paper: a 1-10 score, kept if >= 8, and the reason: by default the abstract's similarity to the topic "
    "(centred on the papers ranked together); optionally the LLM's P(yes) that the paper is relevant (token "
    "log-probabilities), their combination, or the relevance category and task-attribute agreement. Up to "
    "`ideation.method_papers` places go to the papers whose method card applies to the topic's data and output.",
    topic_inputs=("topic_brief",),
)
def paper_rankings(context: dg.AssetExecutionContext, config: RankingConfig, papers: pl.DataFrame,
                   topic_brief: pl.DataFrame, llm: LLM, embedder: Embedder):
    brief = from_frame(topic_brief, TopicBrief)[0]
    items = from_frame(papers, Paper)
    with llm.track("paper_rankings") as usage:
        scores = rank_papers(brief, items, llm, mode=config.mode, embedder=embedder, batch=config.batch or None)
    # a brief without the captured spec (made in tests) gets the setting's default
    places = (captured(brief).spec.ideation if brief.spec_json else IdeationSpec()).method_papers
    scores, kinds, added = with_method_papers(brief, scores, places)
    df = to_frame(scores, PaperScore)
    kept = [s for s in scores if s.kept]
    context.log.info(f"kept {len(kept)}/{len(scores)} papers (score >= {KEEP_AT}, mode {config.mode}; {added} of them "
                     f"as applicable method papers)")
    check = expectation_check("scores_consistent", df.with_columns(
        kept_matches_score=pl.col("kept") == (pl.col("score") >= KEEP_AT)), [
        E("ExpectColumnValuesToBeBetween", column="score", min_value=1, max_value=10),
        E("ExpectColumnValuesToBeInSet", column="kept_matches_score", value_set=[True]),
    ], asset_key="paper_rankings")
    rows = sorted((s.model_dump() for s in scores), key=lambda r: (not r["kept"], -r["score"]))
    columns = ["score", "kept", "relevance", "attribute_match", "title", "reason"]
    if config.mode == "attributes":
        columns[4:4] = ["paper_task", "paper_output"]
    elif config.mode in SIGNAL_MODES:   # P(yes) and the similarity are in the reason
        columns.remove("attribute_match")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "mode": config.mode, "kept": len(kept), "dropped": len(scores) - len(kept),
        "not_judged": sum(s.error is not None for s in scores),
        "method_papers_added": added, "method_papers_places": places,
        "topic_kinds": dg.MetadataValue.json({"data": sorted(kinds.data), "task": sorted(kinds.task)}),
        "rankings": dg.MetadataValue.md(md_table(rows, columns)),
        **usage_metadata(usage),
    })
