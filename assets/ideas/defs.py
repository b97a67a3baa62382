"""ideas (DOLPHIN 3.1): generate ideas with feedback from earlier rounds."""
from dataclasses import dataclass

import dagster as dg
import polars as pl

from assets.ideas import prompts as idea_prompts
from assets.ideas.chains import FORWARD, paper_chains, per_chain, prompt_chain
from assets.ideas.generation import (
    card_choices,
    card_ideas,
    drafts_to_ideas,
    idea_tokens,
    ideas_asked,
    merge_paths,
    prompt_inputs,
    read_history,
    round_places,
    shown_cards,
    tunes,
    tuning_ideas,
)
from assets.ideas.scipip import Retrieval, papers_references, prompt_papers, scipip_retrieval
from assets.paper_rankings.prompts import topic_text
from assets.round_reference.reference import reference_metadata, reference_of
from assets.shared.checks import E, expectation_check
from assets.shared.data_profile import topic_data
from assets.shared.metadata import md_table, topic_metadata, usage_metadata
from assets.shared.partitions import round_asset, round_key_of
from assets.shared.topics import topic_of
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from resources.sources import LocalSource
from resources.store import RecordStore
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import chain_ideas as chain_schema
from schemas.llm_outputs import idea_list
from schemas.records import Idea, Paper, PaperChain, PaperScore


@round_asset(
    "ideas_complete", "every idea has a unique id, a title and a summary",
    "New ideas in DOLPHIN's fields from each idea source of `ideation.sources`, merged before the filters: "
    "ranking (the kept papers, the code, earlier ideas and effective ideas; the default), scipip (papers "
    "retrieved by embedding similarity, shared entities and citation co-occurrence, near-duplicates dropped), "
    "chains (chains of papers back in time from the round's best papers, along citations or, where none is known, "
    "marked similarity links; one request per chain: trend, next step, ideas; Chain-of-Ideas), "
    "brainstorm (the topic and code alone) and tuning (hyper-parameter moves read from the code, no LLM).",
    topic_inputs=("topic_brief",),
)
def ideas(context: dg.AssetExecutionContext, papers: pl.DataFrame, paper_rankings: pl.DataFrame,
          topic_brief: pl.DataFrame, round_reference: pl.DataFrame, llm: LLM, embedder: Embedder,
          store: RecordStore, literature: Literature):
    topic, round_key = round_key_of(context)
    captured = topic_of(topic_brief)
    rt = reference_of(topic_brief, round_reference)  # the code the round works on (the best so far, or the original)
    spec = captured.spec
    cfg = spec.ideation
    budget = spec.budget.ideas_per_round
    history = read_history(store, topic, round_key)
    kept, refs, effective = prompt_inputs(papers, paper_rankings, history)
    head = (spec.title, spec.description, spec.metric.name, spec.metric.goal, rt.code)
    taken = set(history.names)
    places = round_places(cfg, history, budget).moves if "tuning" in cfg.sources else None
    # hyper-parameter moves read from the code (no LLM call); beyond `places`: a reserve
    moves = (tuning_ideas(rt.code, history, max(places, budget) if cfg.tuning_fill else places, topic, round_key,
                          taken) if places is not None else [])
    n = ideas_asked(cfg, budget, places, len(moves))  # ideas asked of each LLM source
    tuned = tunes(cfg.sources, rt.code)  # the LLM's ideas then leave the hyper-parameter values to the moves
    errors, paths, retrieval, chained = {}, {}, None, None
    card_count = 0  # method cards the ranking source's prompt showed
    from_cards: list[Idea] = []  # the ranking source's ideas that apply one card each
    with llm.track("ideas") as usage:
        for source in cfg.sources:  # one request per source, in the topic's order
            if source == "tuning":
                paths[source] = moves
                continue
            if source == "chains":  # one request per chain (assets/ideas/chains.py)
                chained = chain_ideas(llm, embedder, literature, spec, head, papers, paper_rankings, history,
                                      effective, n, topic, round_key, taken, tuned)
                paths[source] = chained.ideas
                if chained.failures:
                    errors[source] = "; ".join(chained.failures)
                for note in chained.notes:
                    context.log.info(f"chains: {note}")
                continue
            cards: list[tuple[int, str, str]] = []
            asked = n  # ideas this source's one request asks for
            if source == "ranking":  # the kept papers, with the method cards that apply to the topic
                cards = shown_cards(kept, head)
                card_count = len(cards)
                # first one idea per untried card, each asked alone with the data; the request for
                # several ideas at once fills what the cards leave
                chosen = card_choices(cards, rt.code, history.cards, n)
                from_cards, failed = card_ideas(llm, head, chosen, kept, history, topic, round_key, taken,
                                                data=topic_data(spec))
                for err in failed:
                    context.log.warning(f"card idea failed: {err}")
                asked = n - len(from_cards)
                if asked <= 0:
                    paths[source] = from_cards
                    continue
                shown, msgs = kept, idea_prompts.generate(*head, refs, history.tried, effective, asked,
                                                          analysis=history.analysis, tuned=tuned, cards=cards)
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
            res = llm.complete(msgs, stage="ideas", schema=idea_list(asked), max_tokens=idea_tokens(asked, cards))
            if not res.ok:
                errors[source] = res.error
            paths[source] = (from_cards if source == "ranking" else []) + drafts_to_ideas(
                res.value.ideas[:asked] if res.ok else [], topic, round_key, shown, history, source=source, taken=taken,
                cards=[pid for _, pid, _ in cards])
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
        "from_ranking": sum(i.source == "ranking" for i in items),
        "from_scipip": sum(i.source == "scipip" for i in items),
        "from_chains": sum(i.source == "chains" for i in items),
        "from_brainstorm": sum(i.source == "brainstorm" for i in items),
        "from_tuning": sum(i.source == "tuning" for i in items),
        "reads_partitions": dg.MetadataValue.json(history.read),
        "method_cards_in_prompt": card_count,
        "card_ideas": len(from_cards),
        "ideas_applying_a_card": sum(i.method_card is not None for i in items),
        "effective_ideas_in_prompt": len(effective), "earlier_ideas_in_prompt": len(history.tried),
        "analysis_in_prompt": history.analysis,
        "ideas": dg.MetadataValue.md(md_table([i.model_dump() for i in items],
                                              ["name", "source", "title", "summary", "inspired_by_papers",
                                               "method_card", "code_place", "builds_on_ideas"])),
        **(retrieval_metadata(retrieval) if retrieval is not None else {}),
        **(chains_metadata(chained) if chained is not None else {}),
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


@dataclass
class Chained:
    """What the chains source did in a round: its chains (with trend, prediction and ideas or an
    error each), its ideas interleaved across the chains, notes on passed-over anchors, the failed
    requests, and how many papers were known to follow citations in."""
    chains: list[PaperChain]
    ideas: list[Idea]
    notes: list[str]
    failures: list[str]
    known: int


def corpus_papers(literature: Literature, embedder: Embedder, spec) -> list[Paper]:
    """Every paper of the topic's literature when it is the `corpus` source (its papers carry the
    ids they cite, so a chain may step to a cited paper the round did not retrieve); else []."""
    src = literature.open(embedder, spec)
    return src.papers() if isinstance(src, LocalSource) and src.name == "corpus" else []


def chain_ideas(llm: LLM, embedder: Embedder, literature: Literature, spec, head: tuple, papers: pl.DataFrame,
                paper_rankings: pl.DataFrame, history, effective: list[str], n: int, topic: str, round_key: str,
                taken: set[str], tuned: bool) -> Chained:
    """The chains source: build `ideation.chains.count` chains, ask one request per chain (a malformed
    answer, after the LLM resource's retries, is recorded on its chain and the others go on), and
    interleave the chains' ideas, n at most."""
    cfg = spec.ideation.chains
    found = from_frame(papers, Paper)
    corpus = corpus_papers(literature, embedder, spec)
    chains, notes, known = paper_chains(embedder.encode, topic_text(spec.title, spec.description), found,
                                        from_frame(paper_rankings, PaperScore), corpus, cfg.count, cfg.length,
                                        cfg.newer)
    library = {p.paper_id: p for p in [*corpus, *found]}
    if not chains:
        notes = [*notes, "no chain of two or more papers could be built: the source proposes nothing this round"]
    k = per_chain(n, len(chains))
    per: list[list[Idea]] = []
    failures = []
    for c in chains:
        msgs = idea_prompts.chain(*head, prompt_chain(c, library), history.tried, effective, k,
                                  analysis=history.analysis, tuned=tuned)
        res = llm.complete(msgs, stage="ideas", schema=chain_schema(k), max_tokens=350 * k + 250)
        if not res.ok:
            c.error = res.error
            failures.append(f"chain {c.index}: {res.error}")
            per.append([])
            continue
        c.trend, c.prediction = res.value.trend.strip(), res.value.prediction.strip()
        per.append(drafts_to_ideas(res.value.ideas[:k], topic, round_key, c.links, history, source="chains",
                                   taken=taken))
    ideas = merge_paths(*per)[:n]  # the chains' ideas interleaved, the round's n at most
    for c, got in zip(chains, per):
        c.ideas = [i.name for i in got if i in ideas]
    return Chained(chains, ideas, notes, failures, known)


def chain_table(c: PaperChain) -> str:
    """One chain as Markdown: a heading with its anchor, its papers oldest first (year, title, link
    kind), then the trend and the prediction (or why there are none)."""
    rows = [{"year": link.year, "title": link.title, "paper_id": link.paper_id, "link": link.link,
             "similarity": link.link_similarity} for link in c.links]
    text = (f"**Trend:** {c.trend}\n\n**Predicted next step:** {c.prediction}\n\n"
            f"**Ideas:** {', '.join(c.ideas) or '(none)'}") if c.error is None else f"**Failed:** {c.error}"
    return (f"### Chain {c.index} (anchor {c.anchor}: {c.anchor_reason})\n\n"
            + md_table(rows, ["year", "title", "paper_id", "link", "similarity"]) + "\n\n" + text)


def chains_metadata(ch: Chained) -> dict:
    """The chains source in the ideas asset's metadata: each chain as a table with its trend and
    prediction, and counts (link kinds, failures, the papers known for citations)."""
    links = [link for c in ch.chains for link in c.links]
    return {
        "chains": dg.MetadataValue.md("\n\n".join(chain_table(c) for c in ch.chains) or "(no chain)"),
        "chains_count": len(ch.chains),
        "chain_papers": len(links),
        "chain_citation_links": sum(link.link in ("cites", "cites_earlier") for link in links),
        "chain_similarity_links": sum(link.link in ("similarity", "similar_later") for link in links),
        "chain_newer_papers": sum(link.link in FORWARD for link in links),
        "chain_trends": dg.MetadataValue.json([{"chain": c.index, "trend": c.trend, "prediction": c.prediction}
                                               for c in ch.chains if c.error is None]),
        "chain_failures": dg.MetadataValue.json(ch.failures),
        "chain_notes": dg.MetadataValue.json(ch.notes),
        "chain_known_papers": ch.known,
    }
