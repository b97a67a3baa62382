"""ideas and filtered_ideas (DOLPHIN 3.1): generate with feedback, then keep the independent,
novel ones. Earlier rounds are read through the store (Dagster refuses a declared cycle)."""

from dataclasses import dataclass, field
from itertools import chain, zip_longest
from typing import Callable, Sequence

import dagster as dg
import numpy as np
import polars as pl

from assets.checks import E, expectation_check
from assets.naming import idea_id, snake, unique_name
from assets.novelty import NoveltyOutcome, novelty_check
from assets.partitions import round_asset, round_key_of
from assets.prompts import ideas as idea_prompts
from assets.report import md_table, usage_metadata
from assets.similarity import independence_filter
from assets.topic import topic_spec
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from resources.store import Store, round_number
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaList
from schemas.records import Feedback, FilteredIdea, Idea, PaperScore, TopicBrief

INEFFECTIVE = ("maintenance", "decline")
# which earlier verdicts seed the idea bank (topic.yaml `ideation.bank`); DOLPHIN: ineffective
BANK_VERDICTS: dict[str, tuple[str, ...]] = {
    "ineffective": INEFFECTIVE,
    "ineffective_and_failed": INEFFECTIVE + ("failed",),
    "all_tried": ("improvement",) + INEFFECTIVE + ("failed",),
    "none": (),
}


@dataclass
class History:
    """What earlier rounds of a topic left behind."""
    read: list[str] = field(default_factory=list)       # partitions read, e.g. "r1|topic"
    names: set[str] = field(default_factory=set)
    tried: list[str] = field(default_factory=list)      # "name: title (verdict)"
    ids: dict[str, str] = field(default_factory=dict)   # earlier idea name -> idea_id
    feedback: list[Feedback] = field(default_factory=list)
    analysis: str = ""  # the latest earlier round's LLM analysis (what worked and why)

    @property
    def effective(self) -> list[Feedback]:
        return [f for f in self.feedback if f.effective]

    def bank(self, verdicts: Sequence[str] = INEFFECTIVE) -> list[Feedback]:
        return [f for f in self.feedback if f.verdict in verdicts]


def read_history(store: Store, topic: str, before_round: str) -> History:
    h = History()
    for rk in store.rounds("filtered_ideas", topic):
        if round_number(rk) >= round_number(before_round):
            continue
        fi = store.read("filtered_ideas", topic, rk)
        fb = store.read("feedback_summary", topic, rk)
        h.read.append(f"{rk}|{topic}")
        verdicts = {}
        if fb is not None:
            for f in from_frame(fb, Feedback):
                h.feedback.append(f)
                verdicts[f.idea_id] = f.verdict
                h.analysis = f.round_analysis or h.analysis  # rounds come in order: the last one wins
        for i in from_frame(fi, FilteredIdea):
            h.names.add(i.name)
            h.ids[i.name] = i.idea_id
            status = verdicts.get(i.idea_id) or (i.drop_reason or "not run")
            h.tried.append(f"{i.name}: {i.title} ({status})")
    return h


def drafts_to_ideas(drafts, topic: str, round_key: str, kept_papers: list[PaperScore], history: History,
                    source: str = "literature", taken: set[str] | None = None) -> list[Idea]:
    """LLM drafts -> Idea records: names made unique against `taken` (default: the topic's
    earlier names; pass one shared set to keep two paths' names apart), reference numbers
    mapped to paper ids, Builds_on names mapped to the earlier ideas' ids (unknown ones dropped)."""
    taken = set(history.names) if taken is None else taken
    out = []
    for d in drafts:
        name = unique_name(d.Name or d.Title, taken)
        refs = [kept_papers[i - 1].paper_id for i in d.References if 1 <= i <= len(kept_papers)]
        builds = [history.ids[n] for n in (snake(b.split(":")[0]) for b in d.Builds_on) if n in history.ids]
        out.append(Idea(idea_id=idea_id(topic, round_key, name), topic=topic, round=round_key, name=name,
                        title=d.Title.strip(), experiment=d.Experiment.strip(), summary=d.Summary.strip(),
                        source=source, inspired_by_papers=list(dict.fromkeys(refs)),
                        builds_on_ideas=list(dict.fromkeys(builds))))
    return out


def merge_paths(literature: list[Idea], brainstorm: list[Idea]) -> list[Idea]:
    """Interleave the two paths (L1, B1, L2, B2, ...) so that both get a fair place in the
    order-dependent independence filter and in the round's budget."""
    return [i for i in chain.from_iterable(zip_longest(literature, brainstorm)) if i is not None]


@round_asset(
    "ideas_complete", "every idea has a unique id, a title and a summary",
    "New ideas in DOLPHIN's fields, from the kept papers, the code, earlier ideas and effective ideas "
    "(plus, with `ideation.brainstorm`, ideas from the topic and code alone).",
    topic_inputs=("topic_brief",),
)
def ideas(context: dg.AssetExecutionContext, papers: pl.DataFrame, paper_rankings: pl.DataFrame,
          topic_brief: pl.DataFrame, llm: LLM):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    n = spec.budget.ideas_per_round
    brief = from_frame(topic_brief, TopicBrief)[0]
    kept = [s for s in from_frame(paper_rankings, PaperScore) if s.kept]
    history = read_history(Store(), topic, round_key)
    abstracts = dict(zip(papers["paper_id"].to_list(), papers["abstract"].to_list()))
    refs = [(i, p.title, abstracts.get(p.paper_id, "")[:300]) for i, p in enumerate(kept, 1)]
    effective = [f"{f.name}: {f.title} ({f.reason})" for f in history.effective]
    head = (spec.title, spec.description, spec.metric.name, spec.metric.goal, spec.code_path.read_text())
    n0 = len(llm.calls())
    taken = set(history.names)
    errors = {}
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
        **usage_metadata(llm.calls()[n0:]),
    })


def filter_ideas(items: list[Idea], bank: list[Feedback], embed: Callable[[list[str]], np.ndarray],
                 novelty: Callable[[Idea], NoveltyOutcome], threshold: float = 0.8,
                 keep_at_most: int | None = None, log: Callable[[str], None] = lambda _: None) -> list[FilteredIdea]:
    """Independence (Algorithm 1 over summary embeddings, bank = `bank`), then the novelty check
    for the independent ideas, in order, until `keep_at_most` are kept (the round's budget when
    the brainstorm path doubled the candidates); every idea is recorded with its reason."""
    if not items:
        return []
    vecs = embed([i.summary for i in items])
    bank_vecs = embed([b.summary for b in bank]) if bank else None
    decisions = independence_filter(vecs, [i.idea_id for i in items], bank_vecs, [b.idea_id for b in bank], threshold)
    out: list[FilteredIdea] = []
    kept = 0
    for item, d in zip(items, decisions):
        nov, drop = NoveltyOutcome(novel=None), None
        if not d.independent:
            drop = f"too similar to {d.nearest} (cosine {d.max_similarity:.2f} >= {threshold})"
        elif keep_at_most is not None and kept >= keep_at_most:
            drop = f"over the round's budget of {keep_at_most} ideas"
            nov.reason = "not checked: budget reached"
        else:
            nov = novelty(item)
            if nov.novel is False:
                drop = f"not novel: {nov.reason}" + (f" (closest: {nov.closest.paper_id})" if nov.closest else "")
            elif nov.error and not nov.decided:
                log(f"{item.name}: novelty undecided, kept: {nov.error}")
        kept += drop is None
        out.append(FilteredIdea(
            **item.model_dump(), max_similarity=d.max_similarity, nearest_bank_idea=d.nearest,
            independent=d.independent, novel=nov.novel, novelty_reason=nov.reason,
            novelty_queries=nov.queries, novelty_evidence=[p.paper_id for p in nov.papers],
            novelty_evidence_titles=[p.title for p in nov.papers],
            novelty_closest_paper=nov.closest.paper_id if nov.closest else None, novelty_error=nov.error,
            kept=drop is None, drop_reason=drop))
        log(f"{item.name}: {'kept' if drop is None else drop}")
    return out


@round_asset(
    "filter_recorded", "similarity in [-1, 1] for every idea; kept ideas are independent",
    "Every idea with its max similarity to the idea bank (Algorithm 1) and its novelty verdict, "
    "with the literature queries and compared papers as evidence.",
)
def filtered_ideas(context: dg.AssetExecutionContext, ideas: pl.DataFrame, llm: LLM, embedder: Embedder,
                   literature: Literature):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    cfg = spec.ideation
    items = from_frame(ideas, Idea)
    history = read_history(Store(), topic, round_key)
    bank = history.bank(BANK_VERDICTS[cfg.bank])
    n0 = len(llm.calls())

    def novelty(item: Idea) -> NoveltyOutcome:
        return novelty_check(spec.title, item.title, item.summary,
                             lambda q, k: literature.search(q, k, embedder, spec), llm,
                             rounds=cfg.novelty_rounds, k=cfg.novelty_papers, item=item.idea_id)

    out = filter_ideas(items, bank, embedder.encode, novelty, cfg.independence_threshold,
                       keep_at_most=spec.budget.ideas_per_round,
                       log=context.log.info)
    df = to_frame(out, FilteredIdea)
    check = expectation_check("filter_recorded", df.with_columns(
        kept_is_independent=~pl.col("kept") | pl.col("independent")), [
        E("ExpectColumnValuesToBeBetween", column="max_similarity", min_value=-1.0001, max_value=1.0001),
        E("ExpectColumnValuesToBeInSet", column="kept_is_independent", value_set=[True]),
    ], asset_key="filtered_ideas")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "kept": sum(o.kept for o in out), "dropped": sum(not o.kept for o in out), "bank_size": len(bank),
        "bank": cfg.bank, "threshold": cfg.independence_threshold, "novelty_rounds": cfg.novelty_rounds,
        "novelty_undecided": sum(o.independent and o.novel is None and o.novelty_error is not None for o in out),
        "reads_partitions": dg.MetadataValue.json(history.read),
        "decisions": dg.MetadataValue.md(md_table([o.model_dump() for o in out],
                                                  ["name", "source", "kept", "max_similarity", "nearest_bank_idea",
                                                   "novel", "novelty_closest_paper", "novelty_queries", "drop_reason"])),
        **usage_metadata(llm.calls()[n0:], by_idea=True),
    })
