"""The records each asset stores (one row per paper / idea / attempt ...).

Ids are stable and human readable so a user can follow an idea through the loop:
`idea_id` = "<topic>/<round>/<name>", e.g. "pointcloud_classification/r1/rotation_augment".
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

Verdict = Literal["improvement", "maintenance", "decline", "failed"]


class TopicBrief(BaseModel):
    """topic_brief: the topic spec plus the task attributes the LLM extracted (DOLPHIN 3.1)."""
    topic: str
    title: str
    description: str
    metric_name: str
    metric_goal: str
    task: str
    input: str
    output: str
    domain: str
    evaluation: str
    search_query: str
    code_excerpt: str = Field("", description="head of the reference file, for prompts")
    llm_error: str | None = None
    # the topic as this brief captured it: later stages read the spec and the code from here, not
    # from disk (defaults: briefs stored before they were recorded; such a brief must be re-made)
    spec_json: str = Field("", description="the parsed topic.yaml (TopicSpec) as JSON")
    topic_dir: str = Field("", description="the topic folder the spec was read from (data files, commands)")
    code: str = Field("", description="the whole reference file")
    code_sha256: str = Field("", description="sha256 of `code`")


class Paper(BaseModel):
    paper_id: str
    title: str
    abstract: str
    year: int | None = None
    venue: str | None = None
    authors: list[str] = []
    arxiv_id: str | None = None
    source: str = "corpus"
    query: str = ""
    retrieval_score: float = 0.0
    # ids (in the same source) of the papers this one cites; the shipped corpus reads them from
    # corpus/citations.jsonl (resources/citations.py), other sources leave the list empty
    references: list[str] = []


class PaperScore(BaseModel):
    paper_id: str
    title: str
    relevance: str          # categorical judgement (see assets/paper_rankings/scoring.py)
    attribute_match: str    # categorical judgement, or the graded agreement "task match, input partial, ..."
    score: int              # 1-10 built from the two categories
    kept: bool              # score >= keep threshold (8)
    reason: str
    error: str | None = None
    mode: str = "judged"    # attributes | naive | judged (assets/paper_rankings/rank.py rank_papers)
    paper_task: str | None = None       # the paper's own task attributes, as the LLM read them
    paper_input: str | None = None
    paper_output: str | None = None
    task_similarity: float | None = None    # cosine with the topic's task / input / output
    input_similarity: float | None = None
    output_similarity: float | None = None


class TuningMove(BaseModel):
    """One hyper-parameter move of the `tuning` idea source (assets/ideas/tuning/): set the knob
    `key` of the round's reference code from `old` to `new`."""
    key: str = Field(description="the knob, stable across rounds: 'EPOCHS', '--lr', 'Adam(lr=)'")
    name: str
    kind: str = Field(description="learning_rate, training_length, width, depth, dropout, weight_decay, penalty, "
                      "label_smoothing, batch_size, or swap (old/new: the member's index in its family, "
                      "old_text/new_text: the names called)")
    where: str = Field(description="where the code sets it, for people")
    function: str = Field(description="the top-level definition it is in ('<module>': top-level statements)")
    direction: Literal["up", "down"]
    old: float
    new: float
    old_text: str
    new_text: str
    paired: TuningMove | None = Field(None, description="a second knob moved in the same idea, after this one: "
                                      "a compensating pair lowers a learning rate and raises the training length "
                                      "beside it by the same factor")


class CarriedChange(BaseModel):
    """An earlier verified improvement that is not in the round's reference code, replayed on it by a
    three-way merge of lines (assets/ideas/merge.py), without the LLM: a win that changed more than
    knob values (a knob-only win is carried over as a `TuningMove`)."""
    win_id: str = Field(description="the idea_id of the verified improvement")
    diff: str = Field(description="the win's change: its code as it ran against its own round's reference")
    code: str = Field(description="the round's reference code with that change merged in")


class Idea(BaseModel):
    idea_id: str
    topic: str
    round: str
    name: str
    title: str
    experiment: str
    summary: str
    source: Literal["ranking", "scipip", "chains", "brainstorm", "tuning"] = Field(
        "ranking", description="the idea source (topic.yaml `ideation.sources`) that proposed it: ranking = "
        "the ranked papers (DOLPHIN), scipip = the SciPIP retrieval, chains = a chain of papers in time "
        "order (Chain-of-Ideas), brainstorm = no papers, tuning = a hyper-parameter move found in the code, or an "
        "earlier win carried over, without the LLM")
    inspired_by_papers: list[str] = Field([], description="the papers the idea names as its inspiration")
    builds_on_ideas: list[str] = []
    source_papers: list[str] = Field([], description="every paper its source showed the model (the kept papers, "
                                     "the SciPIP retrieval's papers, or the chain's papers oldest first; none for "
                                     "brainstorm)")
    tuning: TuningMove | None = Field(None, description="the move, for an idea of the tuning source")
    carry: CarriedChange | None = Field(None, description="the merged change, for an earlier win the tuning source "
                                        "carries over")
    method_card: str | None = Field(None, description="the paper whose method card (corpus/method_cards.jsonl) the "
                                    "idea applies: one the ideas prompt showed, else empty")
    code_place: str | None = Field(None, description="where in the code the idea says it changes (a function, class "
                                   "or lines), as the LLM named it")

    @field_validator("source", mode="before")
    @classmethod
    def _ranking_by_its_name(cls, v: object) -> object:
        # rounds stored before the sources were options call the ranking source "literature"
        return "ranking" if v == "literature" else v


class PaperEntities(BaseModel):
    """The key entities the LLM extracted from one paper (or the topic), memoised once per text and
    model (assets/ideas/scipip.py); an answer that stayed malformed is recorded with its error."""
    paper_id: str
    key: str = Field(description="sha256 of what was asked (prompt version, model, id, title, text)")
    model: str = ""
    entities: list[str] = []
    error: str | None = None


class RetrievedPaper(BaseModel):
    """One paper of the SciPIP retrieval (assets/ideas/scipip.py) with its three signals."""
    paper_id: str
    title: str
    semantic: float = Field(description="cosine between the paper's and the topic's embeddings")
    entity: float = Field(description="share of the paper's entities that match the topic's (1) or the expanded "
                          "entities (0.5)")
    citation: float = Field(0.0, description="co-citations with the other retrieved papers, scaled to [0, 1]; "
                            "0 without citation data")
    score: float = Field(description="semantic + entity + citation: the order of the retrieval")
    via: list[str] = Field([], description="which retrievals found it: semantic, entity, citation")
    entities: list[str] = []
    matched_entities: list[str] = Field([], description="its entities that match the topic's")
    expanded_matches: list[str] = Field([], description="its entities that match an expanded entity")
    entity_error: str | None = Field(None, description="why its entities are missing (malformed answer, not asked)")
    duplicate_of: str | None = Field(None, description="the better scored paper of its cluster (a near-duplicate)")
    duplicate_similarity: float | None = None
    shown: bool = Field(False, description="shown to the ideas prompt")


class ChainLink(BaseModel):
    """One paper of a chain (assets/ideas/chains.py) and how it was reached: backward from the later
    paper, or forward from the earlier one."""
    paper_id: str
    title: str
    year: int | None = None
    link: Literal["anchor", "cites", "similarity", "cites_earlier", "similar_later"] = Field(
        description="anchor = the paper the chain starts from; backward (older than the anchor): cites = the next "
        "later paper of the chain cites this one (known citation data); similarity = no usable citation was known, "
        "so this is the round's paper of the same year or earlier most similar to the later one: not a citation; "
        "forward (newer than the anchor): cites_earlier = this paper cites the one before it; similar_later = no "
        "citing paper was known, so this is the round's paper of the same year or later most similar to the one "
        "before it: not a citation")
    topic_similarity: float = Field(0.0, description="cosine between the paper's and the topic's embeddings")
    link_similarity: float | None = Field(None, description="for a similarity link, the cosine with the paper it "
                                          "was reached from")


class PaperChain(BaseModel):
    """A chain of papers for the chains idea source, oldest first, and what the LLM read in it."""
    index: int = Field(description="1, 2, ...: the order of the chains in the round")
    anchor: str = Field(description="the paper the chain starts from: the papers before it in `links` were reached "
                        "backward, those after it forward")
    anchor_reason: str = ""
    links: list[ChainLink] = Field(description="the papers oldest first; the anchor is the last")
    trend: str = ""
    prediction: str = ""
    ideas: list[str] = Field([], description="names of the ideas the chain's request proposed")
    error: str | None = Field(None, description="why the chain's request gave no ideas (a malformed answer)")


class FilteredIdea(Idea):
    max_similarity: float
    nearest_bank_idea: str | None = None
    independent: bool
    novel: bool | None = None
    novelty_reason: str = ""
    novelty_queries: list[str] = Field([], description="every literature query of the novelty check, in order")
    novelty_evidence: list[str] = Field([], description="ids of every paper the idea was compared with")
    novelty_evidence_titles: list[str] = Field([], description="their titles, same order")
    novelty_closest_paper: str | None = Field(None, description="id of the paper the judge named closest")
    novelty_error: str | None = Field(None, description="why the novelty check could not decide")
    kept: bool
    drop_reason: str | None = None
    # the refill (assets/filtered_ideas/filtering.py fill_round): which generation call proposed the idea
    proposal: int = Field(0, description="0: the ideas asset; k: the k-th refill, asked because the filters "
                          "left the round short of its budget")
    # Idea Arena (assets/filtered_ideas/arena.py, topic.yaml `ideation.arena`): empty when it did not run
    arena_rating: float | None = Field(None, description="ELO rating, mean over the arena's criteria")
    arena_rank: int | None = Field(None, description="1 = best rated of the round's candidates")
    arena_record: str = Field("", description="won-lost-tied over every (order, criterion) game")


class ExperimentPlan(BaseModel):
    idea_id: str
    name: str
    changes: list[str]
    location: str
    evaluation: str
    expected_effect: str
    error: str | None = None
    functions: list[str] = Field(default_factory=list, description="the definitions of the file the plan "
                                 "changes (names found in the file; '<module>' for top-level statements): the "
                                 "functions-format patch is asked to change these "
                                 "(assets/experiment_plans/planning.py)")


class Draft(BaseModel):
    """One implementation draft of an idea and what the cheap checks said of it."""
    index: int
    edit_format: str
    status: Literal["ok", "no_op", "not_applied", "syntax_error", "dishonest", "llm_failed", "duplicate"]
    reason: str | None = None
    how: str = Field("", description="how it was asked: greedy, or the sampling temperature and instruction")
    diff: str = ""
    code: str = ""
    code_sha256: str = Field("", description="sha256 of the normalised program (no comments, docstrings, "
                             "formatting): equal hashes are duplicates")
    imports_ok: bool | None = Field(None, description="the topic's `check` dry run passed (None: no check)")
    resamples: int = 0
    duplicate_of: int | None = None


class Patch(BaseModel):
    idea_id: str
    edit_format: str
    status: Literal["ok", "no_op", "not_applied", "syntax_error", "dishonest", "llm_failed"]
    reason: str | None = None
    diff: str = ""
    code: str = ""          # the whole patched file (the next stage runs it)
    compiles: bool = False
    imports_ok: bool | None = None
    resamples: int = 0      # sampled re-asks after an unchanged or uncompilable answer
    # the implementation search (assets/editing/drafts.py): every draft asked, with its cheap checks;
    # status/code/diff above are the first viable draft's (run_results runs and ranks the viable ones)
    drafts: list[Draft] = Field(default_factory=list, description="every draft asked for this idea, in order")


class TraceFrame(BaseModel):
    file: str
    line: int
    function: str
    code: str = ""


class Attempt(BaseModel):
    attempt: int
    command: list[str]
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    error: str | None = None
    frames: list[TraceFrame] = []
    local_structure: str = ""
    # what the error means + definitions of the names it is about (assets/editing/error_notes.py)
    error_notes: str = ""
    analysis: str = ""              # the LLM's error-related code structure ("structure" debugging)
    fix_status: str | None = None   # ok | not_applied | no_op | syntax_error | dishonest | llm_failed |
                                    # other_file (edits another file) | repeated (gave back a version run)
    fix_error: str | None = None    # why the repair after this attempt failed
    fix_diff: str = ""
    fix_resamples: int = 0          # sampled re-asks after fixes that changed nothing
    fix_rounds: int = 0             # repairs asked after this attempt (each one counts against the budget;
                                    # more than 1: unusable answers)
    reverted: bool = False          # the fix before this attempt broke the script; the next fix starts from
                                    # the code before it
    # the repair search (assets/run_results/repair_search.py run_with_repair): every run after the first is a
    # candidate fix of an earlier run's failure
    parent: int | None = None       # the attempt whose failure this run's code is a candidate fix of
    fix_source: str = ""            # how this run's code was made from its parent's: llm | suggestion (the
                                    # interpreter's "Did you mean" applied without the LLM)
    applied_diff: str = ""          # that change, from the parent's code to this run's
    outcome: str = ""               # how far it got against its parent: success | progress (a different error) |
                                    # same_error | broke (a new error in a line the fix wrote); the last two are
                                    # set aside and the next candidate starts from the parent's code again
    metrics: dict[str, float] = {}


class DraftRun(BaseModel):
    """What the run stage did with one viable draft (assets/run_results/screening.py)."""
    index: int
    screen_status: Literal["", "success", "failed"] = Field("", description="'' when not screened")
    screen_value: float | None = None
    screen_reason: str | None = None
    promoted: bool = Field(False, description="given a full run")
    status: Literal["", "success", "failed"] = Field("", description="the full run's outcome ('' when not run)")
    metric_value: float | None = None
    reason: str | None = None
    n_attempts: int = 0


class RunResult(BaseModel):
    idea_id: str
    status: Literal["success", "failed", "not_implemented"]
    reason: str | None = None
    draft: int | None = Field(None, description="the draft whose run this result is (Patch.drafts index)")
    drafts: list[DraftRun] = Field(default_factory=list, description="each viable draft's screen and full run")
    rule: str = Field("", description="how the draft was chosen (screening.py)")
    attempts: list[Attempt] = []
    n_attempts: int = 0
    metrics: dict[str, float] = {}
    metric_value: float | None = None   # the mean over seeds when the topic repeats seeds
    seed_values: list[float] = Field([], description="the metric per seed (0, 1, ...), when repeated")
    metric_spread: float = Field(0.0, description="sample standard deviation over the seeds")
    reference_values: list[float] = Field(default_factory=list, description="after a second look (verdicts.py): "
                                          "the reference code's values over the same seeds, which the verdict "
                                          "tests against at the second look's level; empty: one look")
    final_code: str = ""
    mlflow_run_id: str | None = None


class Feedback(BaseModel):
    idea_id: str
    name: str
    title: str
    summary: str
    verdict: Verdict
    reason: str
    metric_value: float | None
    baseline_value: float
    delta: float | None = Field(None, description="the mean difference, idea - baseline (over seeds when repeated)")
    effective: bool
    # the statistical test behind the verdict (assets/shared/verdicts.py judge_seeds)
    n_seeds: int = Field(0, description="the idea's seeds (1: not repeated; 0: no metric)")
    n_baseline_seeds: int = Field(0, description="the baseline's seeds")
    ci_low: float | None = Field(None, description="95% interval of the mean difference (Welch), low end")
    ci_high: float | None = Field(None, description="95% interval of the mean difference (Welch), high end")
    p_value: float | None = Field(None, description="one-sided p-value of 'the idea is better than the baseline'")
    test: str = Field("", description="the test: welch_t_one_sided, t_one_run_vs_seeds or none_one_run_each")
    run_s: float | None = Field(None, description="how long the idea's seed-0 run took")
    reference_run_s: float | None = Field(None, description="how long the reference code's seed-0 run took")
    compute_ratio: float | None = Field(None, description="run_s / reference_run_s (None: unknown, or both runs "
                                        "too short to compare); an improvement at or above verdicts.COMPUTE_FLAG "
                                        "says in its reason that more compute may explain it")
    round_analysis: str = Field("", description="the LLM's short analysis of the whole round (same on "
                                "every row of a round); the next round's idea prompt reads it")
    # LLM use of the idea (defaults: records stored before per-idea accounting existed)
    llm_calls: int = Field(0, description="LLM calls made for this idea over the round's stages")
    prompt_tokens: int = Field(0, description="their prompt tokens")
    completion_tokens: int = Field(0, description="their completion tokens")
    cost_usd: float = Field(0.0, description="their price (0 for local models)")
    shared_tokens: float = Field(0.0, description="an even share of the tokens of the calls that served the "
                                 "whole round (and of ideas dropped by the filter)")
    shared_cost_usd: float = Field(0.0, description="the same share of their price")
    # stacked wins (assets/round_reference, assets/best_code): `verdict`, `delta` and the test above are
    # against the round's reference code (topic.yaml `reference`); the same test against the original
    # baseline and against the current best is reported beside it (defaults: records from before stacking)
    reference: str = Field("baseline", description="what the verdict is against: 'baseline' (the original "
                           "reference code) or the idea id of the best code this round built on")
    reference_value: float | None = Field(None, description="mean of the reference code's seeds")
    baseline_verdict: str = Field("", description="the verdict against the original baseline")
    baseline_delta: float | None = Field(None, description="idea - original baseline (means over seeds)")
    baseline_ci_low: float | None = None
    baseline_ci_high: float | None = None
    baseline_p_value: float | None = None
    best_source: str = Field("", description="the current best before this round: 'baseline' or an idea id")
    best_value: float | None = Field(None, description="mean of the current best's seeds")
    best_verdict: str = Field("", description="the verdict against the current best (an improvement here "
                              "makes the idea a candidate for the next best_code)")
    best_delta: float | None = None
    best_ci_low: float | None = None
    best_ci_high: float | None = None
    best_p_value: float | None = None

    @property
    def tokens(self) -> int:
        """The idea's own tokens (prompt + completion)."""
        return self.prompt_tokens + self.completion_tokens


class BestCode(BaseModel):
    """best_code: the best verified code of a topic after a round (assets/best_code/stacking.py),
    with what it contains (the chain of ideas, oldest first) and its diff against the original."""
    topic: str
    round: str = Field(description="the round after which this is the best; '' before any round")
    source: str = Field("baseline", description="the idea whose code this is, or 'baseline' (the original)")
    source_round: str = ""
    improved: bool = Field(False, description="this round made a new best")
    reason: str = Field("", description="why this code is the best: the verdict behind it, or why it was kept")
    code: str
    code_sha256: str
    original_sha256: str = Field(description="sha256 of the reference code topic_brief captured")
    runs_sha256: str = Field(description="sha256 of what a metric value depends on besides the code (run, "
                             "score, metric): a best measured under other commands is not carried over")
    diff: str = Field("", description="unified diff against the original reference code")
    metric_name: str
    metric_goal: str
    metric_value: float | None = Field(None, description="mean over seeds")
    seed_values: list[float] = Field(default_factory=list)
    metric_spread: float = 0.0
    ci_low: float | None = Field(None, description="95% t-interval of the mean over seeds, low end")
    ci_high: float | None = None
    baseline_value: float | None = None
    seed0_metrics: dict[str, float] = Field(default_factory=dict, description="what the code's seed-0 run "
                                            "reported (all its values): the reference of the no-effect rule")
    run_s: float | None = Field(None, description="how long the code's seed-0 run took (the reference of the "
                                "compute flag; None in records made before it)")
    chain: list[str] = Field(default_factory=list, description="idea ids the code contains, oldest first")
    chain_titles: list[str] = Field(default_factory=list)
    chain_rounds: list[str] = Field(default_factory=list)
    candidates: list[str] = Field(default_factory=list, description="this round's ideas judged improvements "
                                  "over the previous best")


class RoundReference(BaseModel):
    """round_reference: what a round works on. `code` is what its stages edit and run (the best
    code so far with topic.yaml `reference: best`, the original with `baseline`); `best` is the
    current best, against which every verdict is also reported."""
    topic: str
    round: str
    mode: Literal["best", "baseline"]
    source: str = Field(description="'baseline' or the idea id whose code `code` is")
    code: str
    code_sha256: str
    values: list[float] = Field(default_factory=list, description="the reference code's seed values")
    seed0_metrics: dict[str, float] = Field(default_factory=dict, description="what the reference code's seed-0 "
                                            "run reported; an idea whose run reports the same did nothing")
    run_s: float | None = Field(None, description="how long the reference code's seed-0 run took")
    chain: list[str] = Field(default_factory=list, description="ideas `code` contains, oldest first")
    best: BestCode
    read_from: str = Field("", description="the best_code partition read (empty: none, the baseline)")
    note: str = ""
