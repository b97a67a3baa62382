"""filtered_ideas (DOLPHIN 3.1): keep the independent, novel ideas; when the filters leave the
round short of its budget, ask for more (topic.yaml `ideation.refills` times at most)."""
import dagster as dg
import polars as pl

from assets.filtered_ideas.arena import arena_for, arena_metadata, arena_order, with_ratings
from assets.filtered_ideas.filtering import (
    RESERVE_KEPT,
    dropped_by_filters,
    fill_round,
    fill_with_moves,
    keep_tuning,
    split_reserve,
)
from assets.filtered_ideas.novelty import NoveltyOutcome, novelty_check, unless_card
from assets.filtered_ideas.retrieval import NoveltySearch
from assets.ideas.generation import (
    BANK_VERDICTS,
    LLM_SOURCES,
    propose_more,
    read_history,
    refill_inputs,
    round_places,
    tunes,
)
from assets.ideas.scipip import papers_references
from assets.round_reference.reference import reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import topic_of
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from resources.store import RecordStore
from schemas.frames import from_frame, to_frame
from schemas.records import FilteredIdea, Idea


@round_asset(
    "filter_recorded", "similarity in [-1, 1] for every idea; kept ideas are independent",
    "Every idea with its max similarity to the idea bank (Algorithm 1) and its novelty verdict, "
    "with the literature queries and compared papers as evidence; ideas asked for again when the "
    "filters left the round short of its budget (refills) are filtered the same way.",
    topic_inputs=("topic_brief",),
)
def filtered_ideas(context: dg.AssetExecutionContext, ideas: pl.DataFrame, papers: pl.DataFrame,
                   paper_rankings: pl.DataFrame, topic_brief: pl.DataFrame, round_reference: pl.DataFrame, llm: LLM,
                   embedder: Embedder, literature: Literature, store: RecordStore):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    spec = captured.spec
    cfg = spec.ideation
    items = from_frame(ideas, Idea)
    history = read_history(store, topic, round_key)
    bank = history.bank(BANK_VERDICTS[cfg.bank])
    # the repeat rule looks at every idea earlier rounds ran, unless the bank is this round's only
    tried = [] if cfg.bank == "none" else [(f.idea_id, f.title, f.verdict) for f in history.feedback]

    # ideation.novelty_retrieval: the literature search as it is, or SciPIP's retrieval over its candidates
    searches = NoveltySearch(cfg.novelty_retrieval, lambda q, k: literature.search(q, k, embedder, spec), llm,
                             embedder.encode, cfg.scipip, papers_references(papers), log=context.log.info)

    def check(item: Idea) -> NoveltyOutcome:
        return novelty_check(spec.title, item.title, item.summary, searches.for_idea(item.idea_id), llm,
                             rounds=cfg.novelty_rounds, k=cfg.novelty_papers, item=item.idea_id)

    # an idea that applies a method card is a published method by design (ideation.novelty_cards)
    novelty = unless_card(check, cfg.novelty_cards)

    # a refill asks the ideas prompt again (the same head: task, the round's code, papers, history), told what
    # this round kept and what the filters dropped and why; its papers follow `ideation.sources` (refill_inputs)
    refill_source, kept_papers, refs, effective = refill_inputs(cfg.sources, items, papers, paper_rankings, history)
    code = reference_of(topic_brief, round_reference).code
    head = (spec.title, spec.description, spec.metric.name, spec.metric.goal, code)

    def propose(missing: int, k: int, decided: list[FilteredIdea]):
        return propose_more(llm, head, refs, effective, kept_papers, history, topic, round_key, missing, decided,
                            source=refill_source, tuned=tunes(cfg.sources, code))

    # the tuning source's moves take their share of the budget first; the filters fill the rest, and
    # the reserve moves (ideation.tuning_fill) the places the filters and refills still left empty
    places = round_places(cfg, history, spec.budget.ideas_per_round)
    if "tuning" in cfg.sources:
        context.log.info(f"places for tuning moves: {places.reason}")
    items, reserve = split_reserve(items, places.moves)
    moves, items = keep_tuning(items, spec.budget.ideas_per_round)
    budget = spec.budget.ideas_per_round - sum(m.kept for m in moves)
    refills = cfg.refills if any(s in LLM_SOURCES for s in cfg.sources) else 0
    with llm.track("filtered_ideas") as usage:
        arena = arena_for(items, spec, code, llm, log=context.log.info)  # None unless ideation.arena
        items = arena_order(items, arena)  # best rated first: the filters spend the budget on them
        filled = fill_round(items, bank, embedder.encode, novelty, cfg.independence_threshold,
                            budget, refills, propose, log=context.log.info, tried=tried)
    for e in filled.refill_errors:
        context.log.warning(f"idea refill failed: {e}")
    moves += fill_with_moves(reserve, budget - filled.kept)
    for m in moves:
        context.log.info(f"{m.name}: {'kept' if m.kept else m.drop_reason} (tuning move, not filtered)")
    out = moves + with_ratings(filled.ideas, arena)  # refilled ideas were not in the arena: no rating
    df = to_frame(out, FilteredIdea)
    check = expectation_check("filter_recorded", df.with_columns(
        kept_is_independent=~pl.col("kept") | pl.col("independent")), [
        E("ExpectColumnValuesToBeBetween", column="max_similarity", min_value=-1.0001, max_value=1.0001),
        E("ExpectColumnValuesToBeInSet", column="kept_is_independent", value_set=[True]),
    ], asset_key="filtered_ideas")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "kept": sum(o.kept for o in out), "dropped": sum(not o.kept for o in out), "bank_size": len(bank),
        "budget": spec.budget.ideas_per_round, "proposals": filled.proposals, "refills": filled.proposals - 1,
        "max_refills": refills, "tuning_moves_kept": sum(m.kept for m in moves),
        "tuning_places": places.moves if "tuning" in cfg.sources else 0,
        "tuning_places_reason": places.reason if "tuning" in cfg.sources else "",
        "reserve_moves_kept": sum(m.kept and m.novelty_reason == RESERVE_KEPT for m in moves),
        "ideas_proposed": len(out),
        "dropped_by_filters": len(dropped_by_filters(out)),
        "refill_errors": "; ".join(filled.refill_errors),
        "bank": cfg.bank, "threshold": cfg.independence_threshold, "novelty_rounds": cfg.novelty_rounds,
        "novelty_undecided": sum(o.independent and o.novel is None and o.novelty_error is not None for o in out),
        "reads_partitions": dg.MetadataValue.json(history.read),
        **{k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in searches.metadata().items()},
        "decisions": dg.MetadataValue.md(md_table([o.model_dump() for o in out],
                                                  ["name", "source", "proposal", "kept", "max_similarity",
                                                   "nearest_bank_idea",
                                                   "novel", "novelty_closest_paper", "novelty_queries",
                                                   "drop_reason"])),
        **arena_metadata(arena, items), **usage_metadata(usage, by_idea=True), **topic_metadata(captured),
    })
