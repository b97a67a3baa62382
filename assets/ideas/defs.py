"""ideas (DOLPHIN 3.1): generate ideas with feedback from earlier rounds."""
import dagster as dg
import polars as pl

from assets.ideas import prompts as idea_prompts
from assets.ideas.generation import drafts_to_ideas, merge_paths, prompt_inputs, read_history
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import topic_of
from resources.llm import LLM
from resources.store import RecordStore
from schemas.frames import to_frame
from schemas.llm_outputs import IdeaList
from schemas.records import Idea


@round_asset(
    "ideas_complete", "every idea has a unique id, a title and a summary",
    "New ideas in DOLPHIN's fields, from the kept papers, the code, earlier ideas and effective ideas "
    "(plus, with `ideation.brainstorm`, ideas from the topic and code alone).",
    topic_inputs=("topic_brief",),
)
def ideas(context: dg.AssetExecutionContext, papers: pl.DataFrame, paper_rankings: pl.DataFrame,
          topic_brief: pl.DataFrame, round_reference: pl.DataFrame, llm: LLM, store: RecordStore):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)  # the code the round works on (the best so far, or the original)
    spec = captured.spec
    n = spec.budget.ideas_per_round
    history = read_history(store, topic, round_key)
    kept, refs, effective = prompt_inputs(papers, paper_rankings, history)
    head = (spec.title, spec.description, spec.metric.name, spec.metric.goal, rt.code)
    taken = set(history.names)
    errors = {}
    with llm.track("ideas") as usage:
        res = llm.complete(idea_prompts.generate(*head, refs, history.tried, effective, n, analysis=history.analysis),
                           stage="ideas", schema=IdeaList, max_tokens=350 * n + 100)
        if not res.ok:
            errors["literature"] = res.error
        items = drafts_to_ideas(res.value.ideas[:n] if res.ok else [], topic, round_key, kept, history, taken=taken)
        if spec.ideation.brainstorm:
            bs = llm.complete(idea_prompts.brainstorm(*head, history.tried, effective, n, analysis=history.analysis),
                              stage="ideas", schema=IdeaList, max_tokens=350 * n + 100)
            if not bs.ok:
                errors["brainstorm"] = bs.error
            items = merge_paths(items, drafts_to_ideas(bs.value.ideas[:n] if bs.ok else [], topic, round_key, [],
                                                       history, source="brainstorm", taken=taken))
    for path, err in errors.items():
        context.log.warning(f"idea generation ({path}) failed: {err}")
    df = to_frame(items, Idea)
    check = expectation_check("ideas_complete", df, [
        E("ExpectColumnValuesToBeUnique", column="idea_id"),
        E("ExpectColumnValueLengthsToBeBetween", column="title", min_value=1),
        E("ExpectColumnValueLengthsToBeBetween", column="summary", min_value=1),
    ], asset_key="ideas")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "count": len(items), "requested": n, "error": "; ".join(f"{k}: {v}" for k, v in errors.items()),
        "brainstorm": spec.ideation.brainstorm,
        "from_literature": sum(i.source == "literature" for i in items),
        "from_brainstorm": sum(i.source == "brainstorm" for i in items),
        "reads_partitions": dg.MetadataValue.json(history.read),
        "effective_ideas_in_prompt": len(effective), "earlier_ideas_in_prompt": len(history.tried),
        "analysis_in_prompt": history.analysis,
        "ideas": dg.MetadataValue.md(md_table([i.model_dump() for i in items],
                                              ["name", "source", "title", "summary", "inspired_by_papers",
                                               "builds_on_ideas"])),
        **usage_metadata(usage), **topic_metadata(captured), **reference_metadata(rt),
    })
