"""papers (DOLPHIN 3.1): retrieve papers for the topic's search query."""
import dagster as dg
import polars as pl

from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table
from assets.shared.partitions import round_asset
from assets.shared.topics import topic_of
from resources.embedder import Embedder
from resources.literature import Literature
from schemas.frames import from_frame, to_frame
from schemas.records import Paper, TopicBrief


@round_asset(
    "papers_usable", "every paper has an id (unique), a title and an abstract",
    "Papers retrieved for the topic's search query from its literature source (corpus, dump, "
    "Semantic Scholar or OpenAlex).",
    topic_inputs=("topic_brief",),
)
def papers(context: dg.AssetExecutionContext, topic_brief: pl.DataFrame, literature: Literature,
           embedder: Embedder):
    spec = topic_of(topic_brief).spec
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
