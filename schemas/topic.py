"""TopicSpec: the declarative `experiments/<topic>/topic.yaml`.

One job, the topic file's schema: the sub-models (metric, budget, ideation, execution) and their
validators stay together because docs/topic-reference.md is generated from this one module and a
reader finds every field of topic.yaml here."""
from __future__ import annotations

import keyword
import math
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    ValidationError,
    field_validator,
    model_validator,
)

# Dagster multi-partition keys use "|" and partition ranges use "," "[" "]": keep names plain.
TOPIC_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_SEEDS = 3  # seeds per side when a topic's run takes {seed} and its budget names no count


class TopicSpecError(ValueError):
    """A topic folder whose topic.yaml cannot be used; the message names the field."""


class MetricSpec(BaseModel):
    """The metric verdicts are decided on: one key of the run's final_info.json."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="the key of final_info.json that holds the metric, e.g. accuracy")
    goal: Literal["maximize", "minimize"] = Field(description="which direction is better")
    tolerance: float = Field(0.0, ge=0, description="the smallest mean difference that counts: an idea is an "
                             "improvement (or a decline) only when it differs from the reference by more than "
                             "this and the seed test is significant; anything else is maintenance")
    bounds: tuple[float | None, float | None] | None = Field(
        None, description="the range a valid value lies in, e.g. [0, 1] for accuracy or [-.inf, 1] for R2 "
        "(null or an infinity: open on that side); a value outside fails the run")

    @field_validator("bounds")
    @classmethod
    def _ordered_bounds(cls, v):
        if v is None:
            return v
        lo = float("-inf") if v[0] is None else float(v[0])
        hi = float("inf") if v[1] is None else float(v[1])
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ValueError(f"must be [low, high] with low <= high, got {list(v)}")
        return (lo, hi)


class Budget(BaseModel):
    """What the loop may spend on the topic: rounds, ideas, papers, repairs, seeds, run limits, and the stop
    rules the round sensor applies before starting another round."""
    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(2, ge=1, description="rounds of the loop; the round sensor starts no round after this "
                        "(`researchloop run --rounds N` overrides it for one run)")
    ideas_per_round: int = Field(3, ge=1, le=50, description="ideas a round implements and runs, after the "
                                 "filters (tuning moves take places in it too)")
    papers: int = Field(30, ge=1, le=500, description="papers the literature search retrieves per round (the "
                        "`papers` asset), before ranking")
    debug_attempts: int = Field(5, ge=0, le=20, description="repair candidates tried when an idea's run fails: "
                                "each LLM answer (one that cannot be applied too) and each mechanical suggestion "
                                "counts one; 0: no repairs")
    run_timeout_s: float = Field(300, gt=0, description="wall-clock limit of one run in seconds; at the limit "
                                 "the run's whole process tree is killed")
    memory_mb: int = Field(4096, ge=256, description="memory limit of one run's whole process tree, in MB "
                           "(on the ray backend also the memory one attempt asks Ray for)")
    seeds: int | None = Field(None, ge=1, le=10, description="seeds 0..seeds-1 for the baseline, and for every "
                              "idea that beats the baseline on its first seed; verdicts test the seed values "
                              "(assets/shared/verdicts.py). Empty: 3 when the run command takes {seed}, "
                              "else 1 (a script without a seed cannot be repeated)")
    second_look: bool = Field(True, description="a candidate better than the reference by more than the tolerance "
                              "but not significant (p < 0.3) runs `seeds` more seeds, and the reference code the same "
                              "ones; the verdict tests all of them at 0.02, which keeps false improvements at 5 % "
                              "over both looks (assets/shared/verdicts.py)")
    # stop rules the round sensor applies before starting another round (empty: no limit)
    max_tokens: int | None = Field(None, ge=1, description="stop when the topic's LLM tokens reach this")
    max_cost_usd: float | None = Field(None, gt=0, description="stop when the topic's LLM cost reaches this")
    patience: int | None = Field(None, ge=1, description="stop after this many rounds in a row without an improvement")
    # implementation search (assets/editing/drafts.py, assets/run_results/screening.py)
    drafts: int = Field(2, ge=1, le=8, description="implementation drafts asked per kept idea; each is checked "
                        "cheaply (compiles, changes what runs, honest, the `check` dry run) and near-duplicates "
                        "are dropped before any run")
    promote: int = Field(1, ge=1, le=8, description="drafts that get a full run: the best `promote` by the `screen` "
                         "run when the topic has one, else the first that succeed in cheap-score order; the best "
                         "of them by the metric is the idea's result (and only it repeats seeds)")


# where a round's ideas come from (topic.yaml `ideation.sources`); each source's ideas carry its name
# (Idea.source)
IdeaSource = Literal["ranking", "scipip", "chains", "brainstorm", "tuning"]


def _default_sources() -> list[IdeaSource]:
    return ["ranking", "tuning"]


class ScipipSpec(BaseModel):
    """SciPIP retrieval (seed paper 001, its 3.2; assets/ideas/scipip.py), used by the `scipip` source."""
    model_config = ConfigDict(extra="forbid")
    entity_papers: int = Field(30, ge=1, le=500, description="how many of the round's papers (the `papers` "
                               "asset), the most similar to the topic first, get their key entities extracted by "
                               "the LLM; each is asked once per paper text and model (a memo under DAGSTER_HOME)")
    semantic_k: int = Field(10, ge=1, le=500, description="papers retrieved by embedding similarity to the topic "
                            "alone (SciPIP's N1); papers sharing an entity with the topic (N2) and papers co-cited "
                            "with them (N3) are added")
    papers: int = Field(8, ge=1, le=30, description="retrieved papers the ideas prompt shows, best scored first, "
                        "after near-duplicates are dropped")
    duplicate_threshold: float = Field(0.85, gt=0, le=1, description="two retrieved papers whose embeddings have "
                                       "cosine >= this are near-duplicates: only the better scored is kept")


class ChainsSpec(BaseModel):
    """Chains of papers (Chain-of-Ideas, seed paper 002, its 2.2-2.3; assets/ideas/chains.py), used by the
    `chains` source: each chain starts at one of the round's best papers and goes back in time (and `newer`
    papers forward)."""
    model_config = ConfigDict(extra="forbid")
    count: int = Field(2, ge=1, le=5, description="chains per round, each from a different anchor paper (the "
                       "papers paper_rankings kept first, then the round's papers most similar to the topic); one "
                       "LLM request per chain")
    length: int = Field(4, ge=2, le=8, description="papers per chain at most, the anchor included: each next paper "
                        "back is one the current paper cites (the most similar to the topic), or where none is known "
                        "the round's paper of the same year or earlier most similar to it (marked as such)")
    newer: int = Field(1, ge=0, le=4, description="papers after the anchor at most, within `length` (Chain-of-Ideas "
                       "extends a chain both ways): each is one citing the paper before it, or where none is known "
                       "the round's paper of the same year or later most similar to it (marked as such); 0: the "
                       "chain only goes back in time")


class IdeationSpec(BaseModel):
    """How ideas are proposed and filtered (DOLPHIN 3.1); the defaults are DOLPHIN's, except that the
    `tuning` source's hyper-parameter moves join the ranking's ideas (`sources: [ranking]` is
    DOLPHIN's loop alone)."""
    model_config = ConfigDict(extra="forbid")
    sources: list[IdeaSource] = Field(
        default_factory=_default_sources, min_length=1,
        description="where ideas come from, any non-empty combination, merged (interleaved in this order) before "
        "the filters: ranking = from the papers paper_rankings kept (DOLPHIN); scipip = from papers retrieved by "
        "embedding similarity, shared entities and citation co-occurrence, near-duplicates dropped (SciPIP, "
        "`ideation.scipip`); chains = from chains of papers going back in time from the round's best papers along "
        "their citations (or, where a paper's references are unknown, its most similar earlier paper, marked as "
        "such): the LLM reads each chain oldest first, names the trend and the next step, and applies that step to "
        "the code (Chain-of-Ideas, `ideation.chains`); brainstorm = from the topic and code alone (no papers); "
        "tuning = hyper-parameter moves found in the code without the LLM (`ideation.tuning_moves` per round, kept "
        "without the filters, within the round's budget; assets/ideas/tuning/; a script with no named knob and no "
        "swap gets none). Default [ranking, tuning]: the moves made the loop's only verified improvements on the "
        "local model so far (bench/RESULTS.md effectiveness); [ranking] alone is DOLPHIN's loop")
    tuning_moves: int = Field(1, ge=1, le=10, description="moves the `tuning` source proposes per round (at most one "
                              "per knob); they take that many of budget.ideas_per_round")
    tuning_adapt: bool = Field(True, description="from round 2 the moves' places follow the loop's own verdicts "
                               "in this topic: the budget is shared between moves and the LLM's ideas in proportion "
                               "to each kind's rate of verified improvements so far ((wins + 1) / (runs + 2)), at "
                               "least tuning_moves and at least one place left for the LLM's ideas "
                               "(assets/ideas/tuning/ tuning_places); false: always tuning_moves")
    tuning_fill: bool = Field(True, description="the tuning source also proposes reserve moves (up to "
                              "budget.ideas_per_round in all, one per knob), which fill the places the filters and "
                              "refills left empty, so a round still tests its budget of ideas")
    brainstorm: bool = Field(False, description="also propose ideas from the topic and code alone "
                             "(no papers) and merge them before filtering (SciPIP's dual path); "
                             "short for adding brainstorm to `sources`")
    scipip: ScipipSpec = Field(ScipipSpec(), description="settings of the `scipip` source's retrieval")
    chains: ChainsSpec = Field(ChainsSpec(), description="settings of the `chains` source")
    independence_threshold: float = Field(0.8, gt=0, le=1, description="an idea whose summary has "
                                          "cosine >= this with an idea in the bank is dropped")
    bank: Literal["ineffective", "ineffective_and_failed", "all_tried", "none"] = Field(
        "ineffective", description="which earlier ideas seed the bank: ineffective = maintenance + "
        "decline (DOLPHIN); all_tried = every earlier idea with a verdict; none = this round only")
    novelty_rounds: int = Field(2, ge=0, le=10, description="literature searches per idea in the "
                                "novelty check; 0 switches the check off")
    novelty_papers: int = Field(5, ge=1, le=20, description="papers shown per novelty search")
    novelty_cards: bool = Field(False, description="check the novelty of ideas that apply a method card too; "
                                "false: such an idea is a published method (its card's paper) applied to this "
                                "task by design, so it is kept without the literature check and its LLM calls")
    novelty_retrieval: Literal["search", "scipip"] = Field(
        "search", description="how a novelty search finds its papers: search = the literature source's search "
        "(hybrid BM25 + embedding on a local source); scipip = SciPIP's retrieval for the query over the search's "
        "top 4 x novelty_papers candidates: embedding similarity to the query, entities shared with it (the "
        "candidates' memoised entities that occur in the query, expanded; no LLM call for the query) and "
        "co-citation, near-duplicates dropped (`ideation.scipip`'s entity_papers and duplicate_threshold; "
        "assets/ideas/scipip.py query_retrieval)")
    arena: bool = Field(False, description="when there are more candidate ideas than budget.ideas_per_round, "
                        "rank them by a pairwise LLM tournament (both orders, ELO; Chain-of-Ideas' Idea Arena, "
                        "assets/filtered_ideas/arena.py) and filter the best rated first")
    candidates: int | None = Field(None, ge=1, le=12, description="ideas each LLM idea source is asked for per "
                                   "round; empty: the places the round leaves the LLM's ideas (budget."
                                   "ideas_per_round less the tuning source's moves; a round the filters leave "
                                   "short asks again, `refills`). More than the budget gives the filters, "
                                   "and the Arena when `arena` is on, candidates to choose the round's ideas from "
                                   "(Chain-of-Ideas proposes many and keeps the best rated)")
    refills: int = Field(2, ge=0, le=5, description="when the filters leave a round with fewer than "
                         "budget.ideas_per_round ideas, ask for more at most this many times, telling the model "
                         "which ideas were dropped and why (assets/filtered_ideas/filtering.py fill_round); "
                         "0 = DOLPHIN's single proposal")
    method_papers: int = Field(3, ge=0, le=10, description="method papers paper_rankings keeps beyond those "
                               "kept on their score: papers whose method card (corpus/method_cards.jsonl) applies to "
                               "the topic's kind of data and output (named in its title, description and metric), the "
                               "best-fitting first, preferring library calls the code does not make yet from packages "
                               "it imports; the ideas prompt shows their cards (assets/paper_rankings/methods.py); "
                               "0: only the ranking's own score decides")

    @field_validator("sources", mode="before")
    @classmethod
    def _one_or_many_sources(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("sources")
    @classmethod
    def _each_source_once(cls, v: list[str]) -> list[str]:
        twice = sorted({s for s in v if v.count(s) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(twice)} more than once")
        return v

    @model_validator(mode="after")
    def _brainstorm_flag_is_a_source(self) -> IdeationSpec:
        # the older flag: `brainstorm: true` adds the brainstorm source; the flag then says whether it is on
        if self.brainstorm and "brainstorm" not in self.sources:
            self.sources = [*self.sources, "brainstorm"]
        self.brainstorm = "brainstorm" in self.sources
        return self


class LiteratureSpec(BaseModel):
    """Where this topic's papers come from, overriding the global `literature` resource
    (RESEARCHLOOP_LITERATURE / RESEARCHLOOP_CORPUS); see resources/literature.py."""
    model_config = ConfigDict(extra="forbid")
    source: Literal["corpus", "dump", "semantic_scholar", "openalex"] | None = Field(
        None, description="empty: the global choice")
    path: str | None = Field(None, description="the corpus/dump file (JSON lines, Parquet or the arXiv "
                             "metadata snapshot), absolute or relative to the topic folder")
    format: Literal["auto", "jsonl", "parquet", "arxiv"] = Field(
        "auto", description="the file's format; auto: from its extension and fields (the arXiv snapshot is "
        "recognised by its fields)")
    categories: list[str] = Field(default_factory=list, description="arXiv categories to keep, e.g. "
                                  "[cs.CV] or an archive [cs] (arXiv snapshot only)")

    @field_validator("categories", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _file_fields_need_a_file_source(self) -> LiteratureSpec:
        if self.source in ("semantic_scholar", "openalex") and (self.path or self.categories):
            raise ValueError(f"path and categories apply to source corpus or dump, not {self.source}")
        return self


# Ray's own resource names: asked for with `cpus`, `gpus` and budget.memory_mb, never as custom resources
RAY_RESERVED_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


class ExecutionSpec(BaseModel):
    """Where this topic's attempts run and what one attempt asks a Ray cluster for
    (resources/ray_backend.py). An empty field is the environment's choice: RESEARCHLOOP_BACKEND,
    RESEARCHLOOP_RAY_CPUS / _GPUS / _RESOURCES. Memory is `budget.memory_mb`. Whether attempts are
    sandboxed is not a topic setting (only RESEARCHLOOP_UNSANDBOXED where Dagster runs)."""
    model_config = ConfigDict(extra="forbid")
    backend: Literal["local", "ray"] | None = Field(
        None, description="local: a sandboxed subprocess of the step; ray: a Ray task on a worker, under the same "
        "sandbox; empty: RESEARCHLOOP_BACKEND (default local)")
    cpus: StrictFloat | None = Field(None, ge=0, allow_inf_nan=False, description="CPUs one attempt asks Ray for "
                                     "(also its thread count); empty: RESEARCHLOOP_RAY_CPUS")
    gpus: StrictFloat | None = Field(None, ge=0, allow_inf_nan=False, description="GPUs one attempt asks Ray for "
                                     "(a fraction below 1, or a whole number); empty: RESEARCHLOOP_RAY_GPUS")
    resources: dict[str, StrictFloat] | None = Field(
        None, description="custom Ray resources one attempt asks for, e.g. {gpu_slot: 1}; empty: "
        "RESEARCHLOOP_RAY_RESOURCES ({} asks for none)")

    @field_validator("gpus")
    @classmethod
    def _whole_when_above_one(cls, v: float | None) -> float | None:
        if v is not None and v > 1 and not float(v).is_integer():
            raise ValueError(f"must be a fraction below 1 or a whole number of GPUs, not {v:g}")
        return v

    @field_validator("resources")
    @classmethod
    def _plain_resources(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for name, amount in (v or {}).items():
            if not name.strip() or name != name.strip():
                raise ValueError(f"resource name {name!r} must be non-empty, without surrounding spaces")
            if name in RAY_RESERVED_RESOURCES:
                raise ValueError(f"{name!r} is Ray's own resource: use cpus, gpus or budget.memory_mb")
            if not math.isfinite(amount) or amount < 0:
                raise ValueError(f"resource {name!r}: the amount must be a finite number >= 0, not {amount}")
        return v

    @model_validator(mode="after")
    def _requests_need_ray(self) -> ExecutionSpec:
        asked = [f for f in ("cpus", "gpus", "resources") if getattr(self, f) is not None]
        if self.backend == "local" and asked:
            raise ValueError(f"{', '.join(asked)} apply to the ray backend, not backend: local")
        return self


class TopicSpec(BaseModel):
    """One research topic: the reference code the loop edits, how to run and score it, and the loop's budget."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="the topic's name, equal to its folder's name: letters, digits, '_', '-' or "
                      "'.' (at most 64)")
    title: str = Field(description="a short title, shown to the LLM and in the UI")
    description: str = Field(description="what the task is, its input and output, and what is measured; the LLM "
                             "reads it to search papers and propose ideas")
    code: str = Field("experiment.py", description="the one file the loop may edit, relative to the topic folder")
    run: str = Field(description="the command that runs the experiment in the topic folder's copy; it must contain "
                     "{out_dir} and write {out_dir}/final_info.json with the metrics ({seed}: the seed, needed "
                     "for budget.seeds > 1)")
    check: str | None = Field(None, description="optional quick self-check run on every patch, "
                              "e.g. 'python experiment.py --dry_run --out_dir {out_dir}'")
    screen: str | None = Field(None, description="optional short run (e.g. fewer epochs) that ranks an idea's "
                               "drafts before the full runs; it writes the metric like `run` does (and is scored "
                               "like it), e.g. 'python experiment.py --screen --seed {seed} --out_dir {out_dir}'")
    score: str | None = Field(None, description="optional scorer run by the host in a fresh sandbox after each "
                              "successful run: it sees the run's {out_dir} as {pred_dir} (its predictions) and "
                              "the `hidden` files, and writes {out_dir}/final_info.json (or prints the metric); "
                              "the run's own final_info.json is then ignored. {seed}: the seed of the run it "
                              "scores, e.g. for an evaluator that plays seeded games against the predictions")
    hidden: list[str] = Field(default_factory=list, description="files (paths relative to the topic folder) "
                              "that only the scorer sees, e.g. test labels: runs get a workspace without them")
    entry_points: list[str] = Field(
        default_factory=list, description="the functions the task's own evaluator or harness calls, each "
        "'path/inside/the/topic.py:function' or 'module.py:Class.method' (e.g. 'strategy.py:next_move' when "
        "`run` starts an evaluator that imports strategy.py and calls next_move). An edit inside one of them, or "
        "inside anything it calls, changes what runs even though nothing in the file calls it "
        "(assets/patched_code/dead_code.py); an edit that removes or renames one, or changes its required "
        "parameters (added, removed or reordered), is refused before any run with the reason "
        "(assets/editing/entry_points.py). Functions that another Python file of the topic folder imports from "
        "the edited file are found without being listed; list the ones called in ways the folder does not show "
        "(a harness outside it, a name built at run time)")
    metric: MetricSpec = Field(description="the metric the verdicts are decided on")
    budget: Budget = Field(Budget(), description="rounds, ideas, repairs, seeds and run limits")
    ideation: IdeationSpec = Field(IdeationSpec(), description="where ideas come from and how they are filtered")
    literature: LiteratureSpec | None = Field(None, description="this topic's paper source; empty: the global one")
    execution: ExecutionSpec | None = Field(None, description="where this topic's attempts run (local | ray) and "
                                            "what one asks Ray for; empty: the environment's choice")
    reference: Literal["best", "baseline"] = Field(
        "best", description="the code each round edits: best = the best verified code so far (an idea judged an "
        "improvement becomes the next round's reference, assets/best_code); baseline = the original reference "
        "file every round (DOLPHIN's fixed reference)")
    dir: str = Field("", exclude=True, description="folder holding topic.yaml (filled on load)")

    @field_validator("code")
    @classmethod
    def _code_inside_the_folder(cls, v: str) -> str:
        # the host writes LLM output to this path: relative, no "..", (load_topic: no link out)
        if not v.strip() or Path(v).is_absolute() or ".." in Path(v).parts or "\\" in v:
            raise ValueError(f"{v!r} must be a path relative to the topic folder, without '..'")
        return v

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not TOPIC_NAME_RE.match(v):
            raise ValueError("must be letters, digits, '_', '-' or '.' (no '|', ',', '[', ']' or spaces)")
        return v

    @field_validator("run")
    @classmethod
    def _run_has_out_dir(cls, v: str) -> str:
        if "{out_dir}" not in v:
            raise ValueError("must contain {out_dir}, where the script writes final_info.json")
        return v

    @model_validator(mode="after")
    def _seeds_need_a_seed_placeholder(self) -> TopicSpec:
        if self.budget.seeds is None:  # the default: repeat when the script takes a seed
            self.budget = self.budget.model_copy(update={"seeds": DEFAULT_SEEDS if "{seed}" in self.run else 1})
        if (self.budget.seeds or 1) > 1 and "{seed}" not in self.run:  # set just above
            raise ValueError("budget.seeds > 1 needs {seed} in run, e.g. 'python experiment.py --seed {seed} "
                             "--out_dir {out_dir}'")
        return self

    @field_validator("screen")
    @classmethod
    def _screen_has_out_dir(cls, v: str | None) -> str | None:
        if v is not None and "{out_dir}" not in v:
            raise ValueError("must contain {out_dir}, where the short run writes final_info.json")
        return v

    @model_validator(mode="after")
    def _score_and_hidden(self) -> TopicSpec:
        if self.score is not None and "{pred_dir}" not in self.score:
            raise ValueError("field 'score' must contain {pred_dir}, where the run's predictions are")
        if self.hidden and self.score is None:
            raise ValueError("field 'hidden' needs a 'score' command: only the scorer may read hidden files")
        for h in self.hidden:
            if Path(h).is_absolute() or ".." in Path(h).parts or not h.strip():
                raise ValueError(f"field 'hidden': {h!r} must be a path inside the topic folder")
            if Path(h) == Path(self.code):
                raise ValueError(f"field 'hidden': {h!r} is the code the loop edits")
        return self

    @field_validator("entry_points", mode="before")
    @classmethod
    def _one_or_many_entry_points(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("entry_points")
    @classmethod
    def _entry_point_form(cls, v: list[str]) -> list[str]:
        for e in v:
            split_entry_point(e)  # raises ValueError naming what is wrong
        twice = sorted({e for e in v if v.count(e) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(twice)} more than once")
        return v

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def code_path(self) -> Path:
        return self.path / self.code

    def run_command(self, out_dir: str, which: str = "run", seed: int = 0, pred_dir: str = "predictions") -> list[str]:
        import shlex

        return shlex.split(getattr(self, which).replace("{out_dir}", out_dir).replace("{seed}", str(seed))
                           .replace("{pred_dir}", pred_dir))


def split_entry_point(entry: str) -> tuple[str, str]:
    """('path/in/topic.py', 'name' or 'Class.method') of an `entry_points` item; ValueError naming
    what is wrong (no ':', a path outside the topic folder or not a .py file, a name that is not a
    dotted Python identifier)."""
    path, sep, name = entry.rpartition(":")
    if not sep or not path.strip():
        raise ValueError(f"{entry!r} must be 'path/inside/the/topic.py:function_name' (or ':Class.method')")
    if Path(path).is_absolute() or ".." in Path(path).parts or "\\" in path or not path.endswith(".py"):
        raise ValueError(f"{entry!r}: {path!r} must be a .py file relative to the topic folder, without '..'")
    parts = name.split(".")
    if not name or len(parts) > 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ValueError(f"{entry!r}: {name!r} must be a function name or Class.method (Python identifiers)")
    return path, name


def _defines(source: str, name: str) -> bool:
    """Whether a Python file defines `name` (a top-level function, class or assigned name) or
    `Class.method`."""
    import ast

    top, _, method = name.partition(".")
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == top:
            if not method:
                return True
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == method
                    or isinstance(m, ast.Assign) and any(isinstance(t, ast.Name) and t.id == method
                                                         for t in m.targets)
                    for m in node.body):
                return True
        elif not method and isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == top for t in targets):
                return True
    return False


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        parts.append(f"field '{loc}': {e['msg']}")
    return "; ".join(parts)


def load_topic(folder: str | Path) -> TopicSpec:
    """Load and validate a topic folder; raises TopicSpecError naming the bad field."""
    folder = Path(folder).resolve()
    f = folder / "topic.yaml"
    if not f.is_file():
        raise TopicSpecError(f"{folder.name}: no topic.yaml in {folder}")
    try:
        raw = yaml.safe_load(f.read_text()) or {}
    except yaml.YAMLError as e:
        raise TopicSpecError(f"{folder.name}: topic.yaml is not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise TopicSpecError(f"{folder.name}: topic.yaml must be a mapping")
    try:
        spec = TopicSpec.model_validate({**raw, "dir": str(folder)})
    except ValidationError as e:
        raise TopicSpecError(f"{folder.name}: {_describe(e)}") from e
    if spec.name != folder.name:
        raise TopicSpecError(f"{folder.name}: field 'name' is '{spec.name}' but the folder is '{folder.name}'")
    real = spec.code_path.resolve()
    if not real.is_relative_to(folder):  # a symlink (of the file or a folder on the way) out of the topic
        raise TopicSpecError(f"{folder.name}: field 'code': {spec.code} leads outside the topic folder (to {real})")
    if spec.code_path.is_symlink():
        raise TopicSpecError(f"{folder.name}: field 'code': {spec.code} is a symbolic link; name the file itself")
    if not spec.code_path.is_file():
        raise TopicSpecError(f"{folder.name}: field 'code': {spec.code} not found in the folder")
    for h in spec.hidden:
        if not (folder / h).exists():
            raise TopicSpecError(f"{folder.name}: field 'hidden': {h} not found in the folder")
    for entry in spec.entry_points:
        path, name = split_entry_point(entry)
        f = folder / path
        if not f.resolve().is_relative_to(folder) or not f.is_file():
            raise TopicSpecError(f"{folder.name}: field 'entry_points': {path} not found in the folder")
        try:
            defined = _defines(f.read_text(errors="replace"), name)
        except (SyntaxError, ValueError) as err:
            raise TopicSpecError(f"{folder.name}: field 'entry_points': {path} does not parse: {err}") from err
        if not defined:
            raise TopicSpecError(f"{folder.name}: field 'entry_points': {path} defines no {name}")
    return spec


def discover_topics(root: str | Path) -> tuple[dict[str, TopicSpec], dict[str, str]]:
    """Every folder under root with a topic.yaml: (valid specs by name, errors by folder)."""
    valid: dict[str, TopicSpec] = {}
    errors: dict[str, str] = {}
    root = Path(root)
    if not root.is_dir():
        return valid, errors
    for d in sorted(p for p in root.iterdir() if p.is_dir() and (p / "topic.yaml").exists()):
        try:
            spec = load_topic(d)
            valid[spec.name] = spec
        except TopicSpecError as e:
            errors[d.name] = str(e)
    return valid, errors
