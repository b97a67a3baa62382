"""ideas and filtered_ideas (DOLPHIN 3.1): generate with feedback, then keep the independent,
novel ones. Earlier rounds are read through the store (Dagster refuses a declared cycle)."""

from dataclasses import dataclass, field

import dagster as dg
import polars as pl

from assets.checks import E, expectation_check
from assets.naming import idea_id, unique_name
from assets.partitions import round_asset, round_key_of
from assets.prompts import ideas as idea_prompts
from assets.prompts import novelty as novelty_prompts
from assets.report import md_table, usage_metadata
from assets.similarity import independence_filter
from assets.topic import topic_spec
from resources.embedder import Embedder
from resources.literature import Literature
from resources.llm import LLM
from resources.store import Store, round_number
from schemas.frames import from_frame, to_frame
from schemas.llm_outputs import IdeaList, NoveltyJudgement
from schemas.records import Feedback, FilteredIdea, Idea, PaperScore, TopicBrief

INEFFECTIVE = ("maintenance", "decline")


@dataclass
class History:
    """What earlier rounds of a topic left behind."""
    read: list[str] = field(default_factory=list)       # partitions read, e.g. "r1|topic"
    names: set[str] = field(default_factory=set)
    tried: list[str] = field(default_factory=list)      # "name: title (verdict)"
    feedback: list[Feedback] = field(default_factory=list)

    @property
    def effective(self) -> list[Feedback]:
        return [f for f in self.feedback if f.effective]

    def bank(self, verdicts=INEFFECTIVE) -> list[Feedback]:
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
        for i in from_frame(fi, FilteredIdea):
            h.names.add(i.name)
            status = verdicts.get(i.idea_id) or (i.drop_reason or "not run")
            h.tried.append(f"{i.name}: {i.title} ({status})")
    return h


def drafts_to_ideas(drafts, topic: str, round_key: str, kept_papers: list[PaperScore], history: History) -> list[Idea]:
    taken = set(history.names)
    effective = {f.name for f in history.effective}
    out = []
    for d in drafts:
        name = unique_name(d.Name or d.Title, taken)
        refs = [kept_papers[i - 1].paper_id for i in d.References if 1 <= i <= len(kept_papers)]
        builds = [f.idea_id for f in history.effective if f.name in set(d.Builds_on) & effective]
        out.append(Idea(idea_id=idea_id(topic, round_key, name), topic=topic, round=round_key, name=name,
                        title=d.Title.strip(), experiment=d.Experiment.strip(), summary=d.Summary.strip(),
                        inspired_by_papers=list(dict.fromkeys(refs)), builds_on_ideas=builds))
    return out


@round_asset(
    "ideas_complete", "every idea has a unique id, a title and a summary",
    "New ideas in DOLPHIN's fields, from the kept papers, the code, earlier ideas and effective ideas.",
    topic_inputs=("topic_brief",),
)
def ideas(context: dg.AssetExecutionContext, papers: pl.DataFrame, paper_rankings: pl.DataFrame,
          topic_brief: pl.DataFrame, llm: LLM):
    topic, round_key = round_key_of(context)
    spec = topic_spec(topic)
    brief = from_frame(topic_brief, TopicBrief)[0]
    kept = [s for s in from_frame(paper_rankings, PaperScore) if s.kept]
    history = read_history(Store(), topic, round_key)
    abstracts = dict(zip(papers["paper_id"].to_list(), papers["abstract"].to_list()))
    refs = [(i, p.title, abstracts.get(p.paper_id, "")[:300]) for i, p in enumerate(kept, 1)]
    effective = [f"{f.name}: {f.title} ({f.reason})" for f in history.effective]
    n0 = len(llm.calls())
    res = llm.complete(
        idea_prompts.generate(spec.title, spec.description, spec.metric.name, spec.metric.goal,
                              spec.code_path.read_text(), refs, history.tried, effective, spec.budget.ideas_per_round),
        stage="ideas", schema=IdeaList, max_tokens=350 * spec.budget.ideas_per_round + 100)
    drafts = res.value.ideas[: spec.budget.ideas_per_round] if res.ok else []
    items = drafts_to_ideas(drafts, topic, round_key, kept, history)
    if not res.ok:
        context.log.warning(f"idea generation failed: {res.error}")
    df = to_frame(items, Idea)
    check = expectation_check("ideas_complete", df, [
        E("ExpectColumnValuesToBeUnique", column="idea_id"),
        E("ExpectColumnValueLengthsToBeBetween", column="title", min_value=1),
        E("ExpectColumnValueLengthsToBeBetween", column="summary", min_value=1),
    ], asset_key="ideas")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "count": len(items), "requested": spec.budget.ideas_per_round, "error": res.error or "",
        "reads_partitions": dg.MetadataValue.json(history.read),
        "effective_ideas_in_prompt": len(effective), "earlier_ideas_in_prompt": len(history.tried),
        "ideas": dg.MetadataValue.md(md_table([i.model_dump() for i in items],
                                              ["name", "title", "summary", "inspired_by_papers", "builds_on_ideas"])),
        **usage_metadata(llm.calls()[n0:]),
    })


def check_novelty(item: Idea, literature: Literature, embedder: Embedder, llm: LLM, k: int = 5):
    found = literature.search(f"{item.title}. {item.summary}", k, embedder)
    res = llm.complete(novelty_prompts.judge(item.title, item.summary,
                                             [(i, p.title, p.abstract[:300]) for i, p in enumerate(found, 1)]),
                       stage="novelty", schema=NoveltyJudgement, max_tokens=200)
    evidence = [p.paper_id for p in found]
    if not res.ok:
        return None, f"novelty not judged: {res.error}", evidence
    j: NoveltyJudgement = res.value
    closest = found[j.closest_paper - 1].paper_id if 1 <= j.closest_paper <= len(found) else None
    reason = j.reason + (f" (closest: {closest})" if closest else "")
    return j.decision == "novel", reason, evidence


@round_asset(
    "filter_recorded", "similarity in [-1, 1] for every idea; kept ideas are independent",
    "Every idea with its max similarity to the idea bank (Algorithm 1, cosine 0.8) and novelty verdict.",
)
def filtered_ideas(context: dg.AssetExecutionContext, ideas: pl.DataFrame, llm: LLM, embedder: Embedder,
                   literature: Literature):
    topic, round_key = round_key_of(context)
    items = from_frame(ideas, Idea)
    history = read_history(Store(), topic, round_key)
    bank = history.bank()
    threshold = 0.8
    vecs = embedder.encode([i.summary for i in items]) if items else None
    bank_vecs = embedder.encode([b.summary for b in bank]) if bank else None
    decisions = independence_filter(vecs, [i.idea_id for i in items], bank_vecs,
                                    [b.idea_id for b in bank], threshold) if items else []
    n0 = len(llm.calls())
    out: list[FilteredIdea] = []
    for item, d in zip(items, decisions):
        novel, reason, evidence = (None, "", [])
        drop = None
        if not d.independent:
            drop = f"too similar to {d.nearest} (cosine {d.max_similarity:.2f} >= {threshold})"
        else:
            novel, reason, evidence = check_novelty(item, literature, embedder, llm)
            if novel is False:
                drop = f"not novel: {reason}"
        out.append(FilteredIdea(**item.model_dump(), max_similarity=d.max_similarity, nearest_bank_idea=d.nearest,
                                independent=d.independent, novel=novel, novelty_reason=reason,
                                novelty_evidence=evidence, kept=drop is None, drop_reason=drop))
        context.log.info(f"{item.name}: {'kept' if drop is None else drop}")
    df = to_frame(out, FilteredIdea)
    check = expectation_check("filter_recorded", df.with_columns(
        kept_is_independent=~pl.col("kept") | pl.col("independent")), [
        E("ExpectColumnValuesToBeBetween", column="max_similarity", min_value=-1.0001, max_value=1.0001),
        E("ExpectColumnValuesToBeInSet", column="kept_is_independent", value_set=[True]),
    ], asset_key="filtered_ideas")
    return dg.MaterializeResult(value=df, check_results=[check], metadata={
        "kept": sum(o.kept for o in out), "dropped": sum(not o.kept for o in out), "bank_size": len(bank),
        "threshold": threshold, "reads_partitions": dg.MetadataValue.json(history.read),
        "decisions": dg.MetadataValue.md(md_table([o.model_dump() for o in out],
                                                  ["name", "kept", "max_similarity", "nearest_bank_idea", "novel", "drop_reason"])),
        **usage_metadata(llm.calls()[n0:]),
    })
