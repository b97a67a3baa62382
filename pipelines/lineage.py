"""Record-level lineage: topic -> papers -> idea -> filter -> plan -> patch -> attempts ->
verdict -> the later ideas that built on it, read from the stored records; and the ancestry of
stacked wins: which best code an idea was built on, whether it became part of a later best, and
a topic's best code round by round (`best_chain`)."""
from __future__ import annotations

from assets.best_code.stacking import interval_text
from resources.store import RecordStore, Store, record_store, round_number
from schemas.frames import from_frame
from schemas.records import (
    BestCode,
    ExperimentPlan,
    Feedback,
    FilteredIdea,
    PaperScore,
    Patch,
    RoundReference,
    RunResult,
    TopicBrief,
)


def _find(store: RecordStore | Store, asset: str, model, topic: str, round_key: str, idea_id: str):
    df = store.read(asset, topic, round_key)
    if df is None:
        return None
    return next((r for r in from_frame(df, model) if r.idea_id == idea_id), None)


def _topic_section(store: RecordStore | Store, topic: str, round_key: str) -> list[str]:
    out = []
    brief = store.read("topic_brief", topic)
    if brief is not None:
        b = from_frame(brief, TopicBrief)[0]
        out += ["## topic", f"- {b.title}: task {b.task!r}, input {b.input!r}, output {b.output!r} "
                            f"({b.metric_goal} {b.metric_name})", f"- literature query: {b.search_query!r}"]
        if b.code_sha256:
            out.append(f"- reference code sha256 {b.code_sha256[:16]} "
                       "(as topic_brief captured it; every stage used it)")
    ranks = store.read("paper_rankings", topic, round_key)
    if ranks is not None:
        scores = from_frame(ranks, PaperScore)
        out.append(f"- papers ranked this round: {len(scores)}, kept (score >= 8): {sum(s.kept for s in scores)}")
    return out


def _later_rounds(store: RecordStore | Store, topic: str, round_key: str, idea_id: str) -> list[str]:
    """What the next rounds did with the idea: ideas that built on it, ideas filtered against it."""
    built, compared = [], []
    for rk in store.rounds("filtered_ideas", topic):
        if round_number(rk) <= round_number(round_key):
            continue
        for i in from_frame(store.read("filtered_ideas", topic, rk), FilteredIdea):
            if idea_id in i.builds_on_ideas:
                built.append(f"- {i.idea_id}: {i.title} (kept: {i.kept})")
            if i.nearest_bank_idea == idea_id:
                compared.append(f"- {i.idea_id}: similarity {i.max_similarity:.3f}"
                                + (" - dropped as a near-duplicate" if not i.independent else " - kept as independent"))
    return (["## later ideas that built on it"] + (built or ["- (none yet)"])
            + ["## later ideas compared with it in the idea bank"] + (compared or ["- (none yet)"]))


def idea_lineage(idea_id: str, store: RecordStore | Store | None = None) -> str:
    store = store or record_store()
    try:
        topic, round_key, _ = idea_id.split("/")
        round_number(round_key)
    except ValueError:
        return f"unknown idea {idea_id!r}: ids look like <topic>/<round>/<name>"
    idea = _find(store, "filtered_ideas", FilteredIdea, topic, round_key, idea_id)
    if idea is None:
        return f"unknown idea {idea_id!r}: not in filtered_ideas of {round_key}|{topic}"
    out = [f"# {idea.idea_id}: {idea.title}", f"topic {topic}, round {round_key}, origin {idea.source}",
           f"summary: {idea.summary}", f"experiment: {idea.experiment}", ""]
    out += _topic_section(store, topic, round_key)
    ranks = store.read("paper_rankings", topic, round_key)
    scores = {s.paper_id: s for s in from_frame(ranks, PaperScore)} if ranks is not None else {}
    out.append("## inspired by papers")
    for pid in idea.inspired_by_papers or []:
        s = scores.get(pid)
        out.append(f"- {pid}: {s.title if s else ''} (score {s.score if s else '?'}, {s.reason if s else ''})")
    if not idea.inspired_by_papers:
        out.append("- (none cited)")
    if idea.source == "chains" and idea.source_papers:  # the chain it came from, oldest paper first
        out.append(f"- its source (chains) showed a chain of {len(idea.source_papers)} papers, oldest first: "
                   + " -> ".join(idea.source_papers))
    elif idea.source_papers:  # every paper the idea's source showed the model (ranking: kept; scipip: retrieved)
        out.append(f"- its source ({idea.source}) showed {len(idea.source_papers)} papers: "
                   + ", ".join(idea.source_papers))
    out.append("## builds on earlier ideas")
    out += [f"- {b}" for b in idea.builds_on_ideas] or ["- (none)"]
    evidence = [f"{pid} ({t})" for pid, t in zip(idea.novelty_evidence, idea.novelty_evidence_titles)] \
        or idea.novelty_evidence
    out += ["## filter",
            f"- max similarity to the idea bank {idea.max_similarity:.3f} (nearest: {idea.nearest_bank_idea})",
            f"- independent: {idea.independent}; novel: {idea.novel} ({idea.novelty_reason})",
            f"- novelty queries: {'; '.join(repr(q) for q in idea.novelty_queries) or '(none)'}",
            f"- novelty evidence: {', '.join(evidence) or '(none)'}"
            + (f"; closest: {idea.novelty_closest_paper}" if idea.novelty_closest_paper else ""),
            f"- kept: {idea.kept}" + (f" - dropped: {idea.drop_reason}" if idea.drop_reason else "")]
    plan = _find(store, "experiment_plans", ExperimentPlan, topic, round_key, idea_id)
    if plan:
        out += ["## plan"] + [f"- {c}" for c in plan.changes] + [f"- where: {plan.location}",
                                                                   f"- expected: {plan.expected_effect}"]
    patch = _find(store, "patched_code", Patch, topic, round_key, idea_id)
    if patch:
        out += ["## patch", f"- {patch.edit_format}: {patch.status} {patch.reason or ''}".rstrip(), patch.diff[:3000]]
    run = _find(store, "run_results", RunResult, topic, round_key, idea_id)
    if run:
        out.append(f"## attempts ({run.status}; MLflow run {run.mlflow_run_id})")
        for a in run.attempts:
            out.append(f"- attempt {a.attempt}: exit {a.exit_code}, {a.duration_s:.1f}s, "
                       + (f"error: {a.error}" if a.error else f"metrics {a.metrics}")
                       + (f"; fix: {a.fix_status}" if a.fix_status else "")
                       + (f" after {a.fix_rounds} repairs" if a.fix_rounds > 1 else "")
                       + ("; the fix before it broke the script, undone" if a.reverted else ""))
            for fr in a.frames:
                out.append(f"    {fr.file}:{fr.line} in {fr.function}: {fr.code}")
            if a.error_notes:
                out += ["    notes on the error:"] + [f"    {line}" for line in a.error_notes.splitlines()]
            if a.analysis:
                out.append(f"    analysis: {a.analysis}")
            if a.fix_diff:
                out += ["    fix:"] + [f"    {line}" for line in a.fix_diff[:1500].splitlines()]
        if run.seed_values:
            out.append(f"- seeds: {run.seed_values} -> mean {run.metric_value:.4f}, spread {run.metric_spread:.4f}")
    fb = _find(store, "feedback_summary", Feedback, topic, round_key, idea_id)
    if fb:
        out += ["## verdict", f"- {fb.verdict}: {fb.metric_value} vs baseline {fb.baseline_value} ({fb.reason})"]
        if fb.round_analysis:
            out.append(f"- the round's analysis: {fb.round_analysis}")
        out.append("## LLM use")
        if fb.llm_calls or fb.shared_tokens:
            out += [f"- this idea: {fb.llm_calls} calls, {fb.prompt_tokens} prompt + {fb.completion_tokens} "
                    f"completion tokens, ${fb.cost_usd:.6f}",
                    f"- its share of the round's shared calls (papers, ideas, analysis): {fb.shared_tokens:.0f} "
                    f"tokens, ${fb.shared_cost_usd:.6f}"]
        else:
            out.append("- (not recorded: the round predates per-idea accounting, or made no LLM call)")
    out += _later_rounds(store, topic, round_key, idea_id)
    out += _stacking(store, topic, round_key, idea_id)
    return "\n".join(out)


def _stacking(store: RecordStore | Store, topic: str, round_key: str, idea_id: str) -> list[str]:
    """Which code the idea was built on (its round's reference) and the later best codes it is part of."""
    out = ["## built on"]
    df = store.read("round_reference", topic, round_key)
    if df is None:
        out.append("- (no round_reference recorded: the original reference code)")
    else:
        ref = from_frame(df, RoundReference)[0]
        if ref.source == "baseline":
            out.append(f"- the original reference code (reference: {ref.mode})")
        else:
            out.append(f"- the best code of {ref.read_from.split('|')[0]}: {ref.source} (reference: {ref.mode}), "
                       f"containing {' -> '.join(ref.chain)}")
        if ref.best.source != ref.source:
            out.append(f"- the current best it was also judged against: {ref.best.source}")
    out.append("## part of the best code")
    found = []
    for rk in store.rounds("best_code", topic):
        if round_number(rk) < round_number(round_key):
            continue
        b = from_frame(store.read("best_code", topic, rk), BestCode)[0]
        if idea_id in b.chain:
            found.append(f"- best after {rk}: {b.source}, {b.metric_name} {_metric(b)}"
                         + (" (new this round)" if b.improved else ""))
    return out + (found or ["- (not part of any best code yet)"])


def _metric(b: BestCode) -> str:
    return interval_text(b)


def best_chain(topic: str, store: RecordStore | Store | None = None) -> str:
    """A topic's best code round by round: source, metric with its interval, what changed, and
    the chain of ideas the latest best contains, with its diff against the original."""
    store = store or record_store()
    rounds = store.rounds("best_code", topic)
    if not rounds:
        return f"unknown topic {topic!r} or no best_code recorded yet"
    out = [f"# best code of {topic}, round by round"]
    last = None
    for rk in rounds:
        b = from_frame(store.read("best_code", topic, rk), BestCode)[0]
        out.append(f"- {rk}: {b.source} {b.metric_name} {_metric(b)}"
                   + (f" - new: {b.reason}" if b.improved else f" - {b.reason}"))
        last = b
    out.append(f"## chain of the best after {last.round} (baseline {last.baseline_value})")
    out += [f"- {r}: {i}: {t}" for r, i, t in zip(last.chain_rounds, last.chain, last.chain_titles)] \
        or ["- (none: the original reference code is still the best)"]
    if last.diff:
        out += ["## diff against the original", last.diff[:4000]]
    return "\n".join(out)


def lineage(target: str, store: RecordStore | Store | None = None) -> str:
    """`researchloop lineage`: an idea id (<topic>/<round>/<name>) prints the idea's lineage; a
    topic name prints its best-code chain."""
    return idea_lineage(target, store) if "/" in target else best_chain(target, store)
