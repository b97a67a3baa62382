"""ideas (DOLPHIN 3.1): generate ideas with feedback from earlier rounds."""
import dagster as dg
import polars as pl

from assets.ideas import prompts as idea_prompts
from assets.ideas.generation import (
    SOURCE_TAG,
    drafts_to_ideas,
    merge_paths,
    prompt_inputs,
    read_history,
    tunes,
    tuning_ideas,
)
from assets.ideas.scipip import Retrieval, papers_references, prompt_papers, scipip_retrieval
from assets.paper_rankings.prompts import topic_text
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import topic_of
from resources.embedder import Embedder
from resources.llm import LLM
from resources.store import RecordStore
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaList
from schemas.records import Idea, Paper


@round_asset(
    "ideas_complete", "every idea has a unique id, a title and a summary",
    "New ideas in DOLPHIN's fields from each idea source of `ideation.sources`, merged before the filters: "
    "ranking (the kept papers, the code, earlier ideas and effective ideas; the default), scipip (papers "
    "retrieved by embedding similarity, shared entities and citation co-occurrence, near-duplicates dropped) "
    "brainstorm (the topic and code alone) and tuning (hyper-parameter moves read from the code, no LLM).",
    topic_inputs=("topic_brief",),
)
def ideas(context: dg.AssetExecutionContext, papers: pl.DataFrame, paper_rankings: pl.DataFrame,
          topic_brief: pl.DataFrame, round_reference: pl.DataFrame, llm: LLM, embedder: Embedder,
          store: RecordStore):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)  # the code the round works on (the best so far, or the original)
    spec = captured.spec
    cfg = spec.ideation
    n = spec.budget.ideas_per_round
    history = read_history(store, topic, round_key)
    kept, refs, effective = prompt_inputs(papers, paper_rankings, history)
    head = (spec.title, spec.description, spec.metric.name, spec.metric.goal, rt.code)
    taken = set(history.names)
    tuned = tunes(cfg.sources, rt.code)  # the LLM's ideas then leave the hyper-parameter values to the moves
    errors, paths, retrieval = {}, {}, None
    with llm.track("ideas") as usage:
        for source in cfg.sources:  # one request per source, in the topic's order
            if source == "tuning":  # hyper-parameter moves read from the code: no LLM call
                k = max(cfg.tuning_moves, n) if cfg.tuning_fill else cfg.tuning_moves  # the rest: a reserve
                paths[source] = tuning_ideas(rt.code, history, k, topic, round_key, taken)
                continue
            if source == "ranking":
                shown, msgs = kept, idea_prompts.generate(*head, refs, history.tried, effective, n,
                                                          analysis=history.analysis, tuned=tuned)
            elif source == "scipip":
                found = from_frame(papers, Paper)
                retrieval = scipip_retrieval(llm, embedder.encode, topic, topic_text(spec.title, spec.description),
                                             found, papers_references(papers), cfg.scipip, log=context.log.info)
                shown, msgs = retrieval.shown, idea_prompts.scipip(*head, prompt_papers(retrieval, found),
                                                                   history.tried, effective, n,
                                                                   analysis=history.analysis, tuned=tuned)
            else:
                shown, msgs = [], idea_prompts.brainstorm(*head, history.tried, effective, n,
                                                          analysis=history.analysis, tuned=tuned)
            res = llm.complete(msgs, stage="ideas", schema=IdeaList, max_tokens=350 * n + 100)
            if not res.ok:
                errors[source] = res.error
            paths[source] = drafts_to_ideas(res.value.ideas[:n] if res.ok else [], topic, round_key, shown, history,
                                            source=SOURCE_TAG[source], taken=taken)
        items = merge_paths(*paths.values())
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
        "sources": dg.MetadataValue.json(list(cfg.sources)), "brainstorm": cfg.brainstorm,
        "ideas_by_source": dg.MetadataValue.json({s: len(paths.get(s, [])) for s in cfg.sources}),
        "from_literature": sum(i.source == "literature" for i in items),
        "from_scipip": sum(i.source == "scipip" for i in items),
        "from_brainstorm": sum(i.source == "brainstorm" for i in items),
        "from_tuning": sum(i.source == "tuning" for i in items),
        "reads_partitions": dg.MetadataValue.json(history.read),
        "effective_ideas_in_prompt": len(effective), "earlier_ideas_in_prompt": len(history.tried),
        "analysis_in_prompt": history.analysis,
        "ideas": dg.MetadataValue.md(md_table([i.model_dump() for i in items],
                                              ["name", "source", "title", "summary", "inspired_by_papers",
                                               "builds_on_ideas"])),
        **(retrieval_metadata(retrieval) if retrieval is not None else {}),
        **usage_metadata(usage), **topic_metadata(captured), **reference_metadata(rt),
    })


def retrieval_metadata(r: Retrieval) -> dict:
    """The SciPIP retrieval in the ideas asset's metadata: the retrieved papers with their three
    scores (Markdown), the entities, and what the citation signal had to work with."""
    rows = [{**p.model_dump(), **{k: ", ".join(getattr(p, k)) for k in ("via", "matched_entities", "expanded_matches")},
             "shown": "yes" if p.shown else (f"duplicate of {p.duplicate_of} ({p.duplicate_similarity})"
                                             if p.duplicate_of else "")}
            for p in r.papers]
    return {
        "scipip_retrieved": dg.MetadataValue.md(md_table(rows, ["paper_id", "title", "semantic", "entity", "citation",
                                                                "score", "via", "matched_entities",
                                                                "expanded_matches", "shown"])),
        "scipip_candidates": r.candidates, "scipip_retrieved_count": len(r.papers), "scipip_shown": len(r.shown),
        "scipip_near_duplicates": sum(p.duplicate_of is not None for p in r.papers),
        "scipip_topic_entities": dg.MetadataValue.json(r.topic_entities),
        "scipip_expanded_entities": dg.MetadataValue.json(r.expanded),
        "scipip_papers_with_entities": r.with_entities,
        "scipip_entity_failures": dg.MetadataValue.json(r.entity_failures),
        "scipip_citations": r.citations,
    }
