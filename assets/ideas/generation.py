"""Idea generation: what earlier rounds left behind, and turning drafts into ideas."""
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from itertools import chain, zip_longest

from assets.editing.edit_formats.base import unified_diff
from assets.ideas import prompts
from assets.ideas.merge import merge3
from assets.ideas.tuning import apply_move, find_knobs, knob_changes, propose, same_move, tuning_places
from assets.shared.naming import idea_id, snake, unique_name
from resources.method_cards import applicable, card_text, load_cards, topic_kinds
from resources.store import RecordStore, Store, round_number
from schemas.frames import from_frame
from schemas.llm_outputs import CardIdea, IdeaDraft, idea_list
from schemas.records import (
    CarriedChange,
    ChainLink,
    Feedback,
    FilteredIdea,
    Idea,
    Paper,
    PaperScore,
    RetrievedPaper,
    TuningMove,
)

INEFFECTIVE = ("maintenance", "decline")


# which earlier verdicts seed the idea bank (topic.yaml `ideation.bank`); DOLPHIN: ineffective
BANK_VERDICTS: dict[str, tuple[str, ...]] = {
    "ineffective": INEFFECTIVE,
    "ineffective_and_failed": INEFFECTIVE + ("failed",),
    "all_tried": ("improvement",) + INEFFECTIVE + ("failed",),
    "none": (),
}


@dataclass
class Win:
    """A verified improvement of an earlier round: its code as it ran and its round's reference code;
    `moves` when the two differ in one or two knob values only (assets/ideas/tuning.py `knob_changes`)."""
    name: str
    idea_id: str
    base: str
    code: str
    moves: list[TuningMove] | None = None


@dataclass
class History:
    """What earlier rounds of a topic left behind."""
    read: list[str] = field(default_factory=list)       # partitions read, e.g. "r1|topic"
    names: set[str] = field(default_factory=set)
    tried: list[str] = field(default_factory=list)      # "name: title (verdict)"
    ids: dict[str, str] = field(default_factory=dict)   # earlier idea name -> idea_id
    feedback: list[Feedback] = field(default_factory=list)
    analysis: str = ""  # the latest earlier round's LLM analysis (what worked and why)
    # kept tuning moves, and the other ideas whose code that ran changed one knob value only: (name, move, verdict)
    moves: list[tuple[str, TuningMove, str | None]] = field(default_factory=list)
    tuning_ids: set[str] = field(default_factory=set)  # every tuning move's idea_id (kept or not)
    wins: list[Win] = field(default_factory=list)  # verified improvements, in round order: `carried_ideas`
    carried: set[str] = field(default_factory=set)  # the wins (idea_id) an earlier round carried over by a merge
    cards: set[str] = field(default_factory=set)  # method cards (paper ids) that kept ideas of earlier rounds applied

    @property
    def effective(self) -> list[Feedback]:
        """The earlier ideas that improved the result, the tuning moves left out: their code is the
        round's reference when the topic stacks wins, and the local model copies their titles."""
        return [f for f in self.feedback if f.effective and f.idea_id not in self.tuning_ids]

    def bank(self, verdicts: Sequence[str] = INEFFECTIVE) -> list[Feedback]:
        return [f for f in self.feedback if f.verdict in verdicts]


def read_history(store: RecordStore | Store, topic: str, before_round: str) -> History:
    """What the rounds of `topic` before `before_round` left in the record store."""
    h = History()
    for rk in store.rounds("filtered_ideas", topic):
        if round_number(rk) >= round_number(before_round):
            continue
        fi = store.read("filtered_ideas", topic, rk)
        fb = store.read("feedback_summary", topic, rk)
        h.read.append(f"{rk}|{topic}")
        verdicts, knob_only = {}, {}
        if fb is not None:
            round_fb = from_frame(fb, Feedback)
            for f in round_fb:
                h.feedback.append(f)
                verdicts[f.idea_id] = f.verdict
                h.analysis = f.round_analysis or h.analysis  # rounds come in order: the last one wins
            wins, knob_only = round_wins(store, topic, rk, round_fb)
            h.wins += wins
        for i in from_frame(fi, FilteredIdea):
            h.names.add(i.name)
            h.ids[i.name] = i.idea_id
            status = verdicts.get(i.idea_id) or (i.drop_reason or "not run")
            if i.source == "tuning":  # a move is the tuning source's history, not an idea for the LLM to copy
                h.tuning_ids.add(i.idea_id)
                if i.carry is not None:
                    if i.kept:
                        h.carried.add(i.carry.win_id)
                elif i.kept and i.tuning is not None:
                    h.moves.append((i.name, i.tuning, verdicts.get(i.idea_id)))
                continue
            if i.idea_id in knob_only:  # the LLM's idea was a move: the tuning source neither repeats its value
                h.moves.append((i.name, knob_only[i.idea_id], verdicts[i.idea_id]))  # nor ignores its verdict
            h.tried.append(f"{i.name}: {i.title} ({status})")
            if i.kept and i.method_card:
                h.cards.add(i.method_card)
    return h


def round_wins(store: RecordStore | Store, topic: str, round_key: str,
               feedback: Sequence[Feedback]) -> tuple[list[Win], dict[str, TuningMove]]:
    """What the round's code that ran (after any repairs) says against the round's reference code:
    - its verified improvements, with their moves when the two differ in knob values only
      (assets/ideas/tuning.py `knob_changes`);
    - every judged idea (improvement, maintenance, decline) whose code differs in one knob value only,
      idea_id -> that move."""
    judged = [f for f in feedback if f.verdict in ("improvement",) + INEFFECTIVE]
    ref, runs = store.read("round_reference", topic, round_key), store.read("run_results", topic, round_key)
    if not judged or ref is None or runs is None or ref.is_empty():
        return [], {}
    code = ref["code"][0]  # RoundReference.code; RunResult.final_code: the code that ran, after any repairs
    ran = dict(zip(runs["idea_id"].to_list(), runs["final_code"].to_list()))
    wins, single = [], {}
    for f in judged:
        if not (ran.get(f.idea_id) or "").strip():
            continue
        moves = knob_changes(code, ran[f.idea_id]) or None
        if f.verdict == "improvement":
            wins.append(Win(f.name, f.idea_id, code, ran[f.idea_id], moves))
        if moves is not None and len(moves) == 1:
            single[f.idea_id] = moves[0]
    return wins, single


def prompt_inputs(papers, paper_rankings, history: History) -> tuple[list[PaperScore], list[tuple[int, str, str]],
                                                                    list[str]]:
    """What an idea prompt shows besides the task and the code: the kept papers, their numbered
    references (title + the start of the abstract) and the earlier effective ideas."""
    kept = [s for s in from_frame(paper_rankings, PaperScore) if s.kept]
    abstracts = dict(zip(papers["paper_id"].to_list(), papers["abstract"].to_list()))
    refs = [(i, p.title, abstracts.get(p.paper_id, "")[:300]) for i, p in enumerate(kept, 1)]
    effective = [f"{f.name}: {f.title} ({f.reason})" for f in history.effective]
    return kept, refs, effective


MAX_CARDS = 8  # method cards one idea prompt shows at most (the best fitting): each adds a paragraph


def shown_cards(papers: Sequence[PaperScore | RetrievedPaper | Paper | ChainLink], head: tuple,
                cards: dict | None = None) -> list[tuple[int, str, str]]:
    """The method cards an idea prompt shows for its numbered `papers` (1-based, as the prompt numbers
    them): (number, paper id, card text) for each paper whose card applies to the topic (resources/
    method_cards.py `fit`, from the topic's title, description and metric in `head`), the best
    fitting MAX_CARDS in the papers' order. A topic whose words name no kind of data or output sees
    every card of its papers."""
    cards = load_cards() if cards is None else cards
    ids = [p.paper_id for p in papers]
    kinds = topic_kinds(head[0], head[1], head[2])
    fits = applicable(ids, kinds, cards) if kinds.known else {pid: 1 for pid in ids if pid in cards}
    best = sorted(fits, key=lambda pid: (-fits[pid], ids.index(pid)))[:MAX_CARDS]
    out = []
    for i, pid in enumerate(ids, 1):
        text = card_text(pid, cards) if pid in best else None
        if text:
            out.append((i, pid, text))
    return out


def _same_family(library: str | None, code: str) -> bool:
    """Whether a card's library call comes from a module the code already uses (sklearn.linear_model
    for a ridge baseline and a lasso card): the tuning source's swaps explore that family already."""
    if not library or "." not in library:
        return False
    module = library.rsplit(".", 1)[0]
    return bool(re.search(rf"\b{re.escape(module)}\b", code))


def _imports_package(library: str, code: str) -> bool:
    """Whether the code imports the top-level package of a card's library call (sklearn for
    sklearn.ensemble.RandomForestRegressor)."""
    package = re.escape(library.split(".")[0])
    return bool(re.search(rf"^\s*(?:import|from)\s+{package}\b", code, re.M))


def card_order(library: str | None, code: str) -> int:
    """Where a card goes among a round's choices: 0, a library call from a package the code already
    imports but a module it does not use (trees for a scikit-learn ridge, AdamW for a PyTorch net): a
    method the code's own stack implements, installed, applied in a few lines; 1, a recipe without a
    library call or a call from another package; 2, a call of the code's own module family, which the
    tuning source's swaps explore already."""
    if not library:
        return 1
    if _same_family(library, code):
        return 2
    return 0 if _imports_package(library, code) else 1


def card_choices(shown: Sequence[tuple[int, str, str]], code: str, tried: Collection[str], n: int,
                 cards: dict | None = None) -> list[tuple[int, str, str]]:
    """Up to n of the shown cards ((number, paper id, text), `shown_cards`) to apply this round, one
    idea each: those no kept idea of an earlier round applied (`tried`), in `card_order`, then in the
    papers' order."""
    cards = load_cards() if cards is None else cards
    left = [c for c in shown if c[1] not in tried]
    order = {pid: card_order(cards[pid].library if pid in cards else None, code) for _, pid, _ in left}
    return sorted(left, key=lambda c: order[c[1]])[:n]


def card_ideas(llm, head: tuple, chosen: Sequence[tuple[int, str, str]], kept_papers: Sequence, history: History,
               topic: str, round_key: str, taken: set[str], data: str = "") -> tuple[list[Idea], list[str]]:
    """One idea per chosen card (`card_choices`): the model writes how the card's method applies to
    this code (prompts.apply_card; the requests share the task and the code, so on the local server
    they go as `LLM.map` sends a shared prefix). Each idea records its card and cites its paper.
    Returns the ideas, in the cards' order, and one error per card whose answer stayed unusable."""
    def ask(c: tuple[int, str, str]):
        number, pid, text = c
        return llm.complete(prompts.apply_card(*head, text, history.tried, data=data), stage="ideas",
                            schema=CardIdea, max_tokens=CARD_IDEA_TOKENS, item=pid)

    results = llm.map(ask, list(chosen), shared_prefix=True)
    drafts, errors = [], []
    for (number, pid, _), res in zip(chosen, results):
        if not res.ok:
            errors.append(f"{pid}: {res.error}")
            continue
        v: CardIdea = res.value
        drafts.append(IdeaDraft(Name=snake(v.Title, f"apply_{pid}")[:40].strip("_"), Title=v.Title,
                                Experiment=v.Experiment, Summary=v.Summary, References=[number], Builds_on=[],
                                method_card=pid, code_place=v.code_place))
    return drafts_to_ideas(drafts, topic, round_key, kept_papers, history, taken=taken,
                           cards=[pid for _, pid, _ in chosen]), errors


CARD_IDEA_TOKENS = 350  # one card idea: four short fields


def chosen_card(answer: str | None, papers: Sequence, shown: Collection[str]) -> str | None:
    """The shown card an idea names in its method_card answer: the paper id (any case, brackets
    around it or words beside it), or the paper's number in the prompt; None for an empty answer or a
    card that was not shown (the idea is kept without it)."""
    text = (answer or "").strip()
    if not text or not shown:
        return None
    bare = text.strip("[]() .").lower()
    by_lower = {pid.lower(): pid for pid in shown}
    if bare in by_lower:
        return by_lower[bare]
    number = re.fullmatch(r"(?:paper|card|ref(?:erence)?)?\s*#?\s*(\d+)", bare)
    if number and 1 <= int(number.group(1)) <= len(papers):
        pid = papers[int(number.group(1)) - 1].paper_id
        return pid if pid in shown else None
    named = [pid for pid in shown if pid.lower() in text.lower()]
    return named[0] if len(named) == 1 else None


def refill_inputs(sources: Sequence[str], items: Sequence[Idea], papers, paper_rankings,
                  history: History) -> tuple[str, list, list[tuple[int, str, str]], list[str]]:
    """What a refill shows, and the source its ideas record, by the topic's `ideation.sources`:
    with ranking, the kept papers (DOLPHIN: `ranking`); else with scipip or chains,
    the papers that source showed (its first such idea's `source_papers`: the retrieval's papers,
    or one chain's papers oldest first); else no paper (`brainstorm`).
    Returns (source tag, the numbered papers, their references, the effective ideas)."""
    kept, refs, effective = prompt_inputs(papers, paper_rankings, history)
    if "ranking" in sources:
        return "ranking", kept, refs, effective
    for tag in ("scipip", "chains"):
        if tag not in sources:
            continue
        shown = next((i.source_papers for i in items if i.source == tag and i.source_papers), [])
        by_id = {p.paper_id: p for p in from_frame(papers, Paper)}
        found = [by_id[pid] for pid in shown if pid in by_id]
        return tag, found, [(i, p.title, p.abstract[:300]) for i, p in enumerate(found, 1)], effective
    return "brainstorm", [], [], effective


def propose_more(llm, head: tuple, refs: list[tuple[int, str, str]], effective: list[str],
                 kept_papers: Sequence[PaperScore | Paper], history: History, topic: str, round_key: str,
                 missing: int, decided: Sequence[FilteredIdea],
                 source: str = "ranking", tuned: bool = False) -> tuple[list[Idea], str | None]:
    """A refill: `missing` more ideas for the round, the model told which of this round's ideas
    are kept and which were dropped and why (assets/ideas/prompts.py `refill`), tagged `source`
    (refill_inputs). Returns the new ideas (names unique against earlier rounds and this one) and
    the error of a failed call."""
    kept = [f"{i.name}: {i.title}" for i in decided if i.kept and i.source != "tuning"]
    dropped = [f"{i.name}: {i.summary} (dropped: {i.drop_reason})" for i in decided
               if not i.kept and i.drop_reason and not i.drop_reason.startswith("over the round's budget")]
    cards = shown_cards(kept_papers, head)
    res = llm.complete(prompts.refill(*head, refs, history.tried, effective, missing, kept, dropped,
                                      analysis=history.analysis, tuned=tuned, cards=cards),
                       stage="ideas", schema=idea_list(missing), max_tokens=idea_tokens(missing, cards))
    if not res.ok:
        return [], res.error
    taken = set(history.names) | {i.name for i in decided}
    return drafts_to_ideas(res.value.ideas[:missing], topic, round_key, kept_papers, history, source=source,
                           taken=taken, cards=[pid for _, pid, _ in cards]), None


def idea_tokens(n: int, cards: Sequence = ()) -> int:
    """Answer tokens for n ideas; ideas that name a method card and a code place need a few more."""
    return (400 if cards else 350) * n + 100


def drafts_to_ideas(drafts, topic: str, round_key: str,
                    kept_papers: Sequence[PaperScore | RetrievedPaper | Paper | ChainLink],
                    history: History, source: str = "ranking", taken: set[str] | None = None,
                    cards: Collection[str] = ()) -> list[Idea]:
    """LLM drafts -> Idea records: names made unique against `taken` (default: the topic's
    earlier names; pass one shared set to keep two paths' names apart), reference numbers
    mapped to the ids of the papers the prompt numbered (`kept_papers`, also recorded whole as
    `source_papers`), Builds_on names mapped to the earlier ideas' ids (unknown ones dropped), the
    method card named mapped to one of the `cards` the prompt showed (`chosen_card`; another is
    dropped) and the code place kept as written."""
    taken = set(history.names) if taken is None else taken
    shown = [p.paper_id for p in kept_papers]
    out = []
    for d in drafts:
        name = unique_name(d.Name or d.Title, taken)
        refs = [kept_papers[i - 1].paper_id for i in d.References if 1 <= i <= len(kept_papers)]
        builds = [history.ids[n] for n in (snake(b.split(":")[0]) for b in d.Builds_on) if n in history.ids]
        out.append(Idea(idea_id=idea_id(topic, round_key, name), topic=topic, round=round_key, name=name,
                        title=d.Title.strip(), experiment=experiment_text(d), summary=d.Summary.strip(),
                        source=source, inspired_by_papers=list(dict.fromkeys(refs)),
                        builds_on_ideas=list(dict.fromkeys(builds)), source_papers=shown,
                        method_card=chosen_card(d.method_card, kept_papers, cards),
                        code_place=(d.code_place or "").strip() or None))
    return out


def experiment_text(d) -> str:
    """The idea's Experiment, or its Summary when the Experiment is no description of a change (a small
    model sometimes writes a file name or one word there, e.g. "model"), so the plan and the patch
    are asked for the change the idea describes."""
    experiment, summary = d.Experiment.strip(), d.Summary.strip()
    return summary if len(experiment.split()) < 3 and len(summary.split()) > len(experiment.split()) else experiment


LLM_SOURCES = ("ranking", "scipip", "chains", "brainstorm")  # the sources that ask the LLM (refills ask like them)


def tunes(sources: Sequence[str], code: str) -> bool:
    """Whether the tuning source moves this code's hyper-parameters: it is a source and the code
    has numeric knobs it writes (swaps and unwritten library defaults aside: without them the LLM
    ideas may change values)."""
    return "tuning" in sources and any(k.kind != "swap" and not k.implicit for k in find_knobs(code))


def round_places(cfg, history: History, budget: int):
    """The round's places for the tuning source's moves (assets/ideas/tuning.py `tuning_places`) from
    the topic's ideation spec `cfg` and its earlier rounds: the same answer in `ideas` (how many moves
    to propose) and in `filtered_ideas` (how many take their places first)."""
    return tuning_places(history.feedback, history.tuning_ids, cfg.tuning_moves, budget, cfg.tuning_adapt,
                         any(s in LLM_SOURCES for s in cfg.sources))


def ideas_asked(cfg, budget: int, places: int | None, moves: int) -> int:
    """Ideas each LLM source is asked for: `ideation.candidates` when set; else the places the round
    leaves the LLM's ideas, the budget less the tuning source's `places` it has `moves` for (None:
    no tuning source). An idea beyond them would be filtered out unread; a round the filters leave
    short asks again (`ideation.refills`)."""
    if cfg.candidates:
        return cfg.candidates
    return budget if places is None else max(1, budget - min(places, moves))


def tuning_ideas(code: str, history: History, k: int, topic: str, round_key: str, taken: set[str]) -> list[Idea]:
    """The tuning source's ideas for a round whose reference is `code`: up to `k` hyper-parameter
    moves, the earlier wins carried over first (`carried_ideas`), then assets/ideas/tuning.py
    `propose`'s, each an idea naming the knob, its old and new value and why it was chosen; a move
    continuing an improving one builds on it."""
    out = carried_ideas(code, history, k, topic, round_key, taken)
    for move, why in propose(code, history.moves, k - len(out)):
        swap, p = move.kind == "swap", move.paired
        name = unique_name(f"swap {move.new_text}" if swap else f"tune {move.name} {move.direction}"
                           + (f" {p.name} {p.direction}" if p else ""), taken)
        earlier = [n for n, m, _ in history.moves if m.key == move.key and n in history.ids]
        builds = [history.ids[earlier[-1]]] if earlier and why.startswith("continues") else []
        change, instruction = describe_move(move)
        out.append(Idea(
            idea_id=idea_id(topic, round_key, name), topic=topic, round=round_key, name=name,
            title=f"{'Swap' if swap else 'Tune'} {change}", experiment=instruction,
            summary=(f"A swap within the {move.name} family found in the code without the LLM" if swap else
                     "A compensating pair of hyper-parameter moves found in the code without the LLM" if p else
                     f"A hyper-parameter move ({move.kind}, {move.direction}) found in the code without the LLM")
                    + f": {change}; {why}.",
            source="tuning", builds_on_ideas=builds, tuning=move))
    return out


def describe_move(move: TuningMove) -> tuple[str, str]:
    """(the change for a title, the instruction) of a knob move and its paired knob, if any, or of a swap."""
    p = move.paired
    change = f"{move.name}: {move.old_text} -> {move.new_text}" + (f", {p.name}: {p.old_text} -> {p.new_text}"
                                                                  if p else "")
    if move.kind == "swap":
        return change, (f"Call {move.new_text} instead of {move.old_text}, {move.where}, with the same arguments; "
                        "change nothing else.")
    return change, (f"Set {move.where} from {move.old_text} to {move.new_text}"
                    + (f" and {p.where} from {p.old_text} to {p.new_text}" if p else "") + "; change nothing else.")


def carried_ideas(code: str, history: History, k: int, topic: str, round_key: str, taken: set[str]) -> list[Idea]:
    """Up to `k` earlier verified improvements carried over to `code`, the latest first, each at most once:
    a win that is not in `code` (it was not its round's best, or the reference is another branch) and did not
    run on `code` itself becomes
    - a tuning move (a pair for two) when it changed one or two knob values (`Win.moves`) that still apply to
      `code` and no earlier move tried;
    - else its change (its code as it ran against its round's reference) merged into `code` by lines
      (assets/ideas/merge.py `merge3`), when the merge is clean.
    Two wins of one round stack this way: the best is the next reference, the next one is carried over onto it."""
    out = []
    for win in reversed(history.wins):
        if len(out) >= k:
            break
        if win.base == code:  # the reference has not moved since (e.g. `reference: baseline`): it ran on this code
            continue
        # a carried win that is carried again keeps its name: carry_x_2, not carry_carry_x
        new_name = unique_name(win.name if win.name.startswith("carry_") else f"carry {win.name}", set(taken))
        head = dict(idea_id=idea_id(topic, round_key, new_name), topic=topic, round=round_key, name=new_name,
                    source="tuning", builds_on_ideas=[win.idea_id])
        if win.moves is not None and len(win.moves) <= 2:
            if any(same_move(m, x) for n, m, _ in history.moves if n != win.name for x in win.moves):
                continue
            move = win.moves[0].model_copy(update={"paired": win.moves[1]}) if len(win.moves) == 2 else win.moves[0]
            try:
                if apply_move(code, move) == code:
                    continue
            except ValueError:  # a knob is no longer at the win's old value (the win, or a later change, is in)
                continue
            change, instruction = describe_move(move)
            out.append(Idea(**head, title=f"Carry over {win.name}: {change}", experiment=instruction, tuning=move,
                            summary=(f"The change of {win.idea_id}, a verified improvement that is not in this "
                                     f"round's reference code, applied to it without the LLM: {change}.")))
        else:
            merged = None if win.idea_id in history.carried else merge3(win.base, code, win.code)
            if merged is None or merged == code:  # carried before, clashes with a later change, or already in
                continue
            diff = unified_diff(win.base, win.code, "code")
            out.append(Idea(**head, title=f"Carry over {win.name}: its change merged into this reference",
                            experiment=f"Make the change of {win.name} (its diff: `carry.diff`) again, on this code.",
                            summary=(f"The change of {win.idea_id}, a verified improvement that is not in this "
                                     "round's reference code, merged into it by lines without the LLM."),
                            carry=CarriedChange(win_id=win.idea_id, diff=diff, code=merged)))
        taken.add(new_name)
    return out


def merge_paths(*paths: list[Idea]) -> list[Idea]:
    """Interleave the sources' ideas (L1, B1, L2, B2, ... for two) so that each gets a fair place
    in the order-dependent independence filter and in the round's budget."""
    return [i for i in chain.from_iterable(zip_longest(*paths)) if i is not None]
