"""The `tuning` source's search: which moves a round proposes and how many places they take.

A *move* sets one knob to a new value (`moves`: a multiplicative step for rates and sizes, an
additive one for dropout and depth). Over rounds this is a coordinate search carried by the
loop's own machinery: a move is an idea like any other (its own plan, draft, runs on the topic's
seeds and verdict), an improving move becomes the next round's reference when the topic stacks
wins (the default), and the next round continues a knob that improved in the same direction,
tries the other direction of a knob whose move made the metric significantly worse, never
proposes a value a knob already had, and otherwise takes the untried knobs by kind (`KIND_ORDER`);
swaps come after the numeric knobs and library defaults last. The steps are generic conventions
of ML code, not fitted to the shipped topics."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from assets.ideas.tuning.edits import move_of
from assets.ideas.tuning.knobs import INT_KINDS, KIND_ORDER, Knob, find_knobs, round_like, same_value
from schemas.records import TuningMove


def moves(knob: Knob) -> list[tuple[str, float | int]]:
    """The knob's candidate values from its current one, as (direction, value), the more often
    useful first: longer then shorter training; a faster then a slower rate; wider then narrower; more then
    less dropout, weight decay or penalty; one layer more then one fewer; smaller then larger
    batches. Values that round to the current one are left out."""
    k = knob.kind
    if k == "swap":  # the family's other members that suit every call, later ones first
        return [("up" if j > knob.value else "down", j) for j in knob.choices]
    v = knob.value if k in INT_KINDS else float(knob.value)  # C=1 moves to 3.0 and 0.333, not to 3 and 0
    if k == "training_length":  # longer first; shorter when longer did not help (over-fitting)
        out = [("up", v * 2), ("down", max(1, v // 2))]
    elif k in ("learning_rate", "penalty"):
        out = [("up", v * 3), ("down", v / 3)]
    elif k == "width":
        out = [("up", v * 2), ("down", max(1, v // 2))]
    elif k == "weight_decay":
        out = [("up", 1e-4), ("up", 1e-3)] if v == 0 else [("up", v * 3), ("down", v / 3)]
    elif k in ("dropout", "label_smoothing"):
        step = 0.2 if k == "dropout" else 0.05
        out = [("up", min(0.7, v + step)), ("down", max(0.0, v - step))]
    elif k == "depth":
        out = [("up", v + 1), ("down", max(1, v - 1))]
    else:  # batch_size
        out = [("down", max(1, v // 2)), ("up", v * 2)]
    res, seen = [], set()
    for d, x in out:
        x = round_like(x, v)
        if not same_value(x, v) and x not in seen:
            seen.add(x)
            res.append((d, x))
    return res


# A compensating pair: a learning rate lowered by this factor with the training length beside it raised by
# the same factor (the rate-for-rounds trade of shrinkage in boosting, and of step size for steps in SGD).
COMPENSATE = 3


def partner(knobs: Sequence[Knob], rate: Knob) -> Knob | None:
    """The training-length knob beside the learning rate `rate`, or None: for a keyword of a call
    (`GradientBoostingRegressor(learning_rate=)`), the same callee's length keyword, written or a library
    default; otherwise the first length knob that is not a keyword of a call, in the same top-level
    definition (`LR` and `EPOCHS` at the top level, or the two defaults of `train()`)."""
    lengths = [k for k in knobs if k.kind == "training_length" and k is not rate]
    callee = rate.key.split("(", 1)[0] if rate.key.endswith("=)") else None
    if callee is not None:
        return next((k for k in lengths if k.key.endswith("=)") and k.key.split("(", 1)[0] == callee), None)
    return next((k for k in lengths if not k.key.endswith("=)") and k.function == rate.function), None)


def compensating(rate: Knob, length: Knob) -> TuningMove:
    """The pair that lowers `rate` by COMPENSATE and raises `length` by the same factor."""
    lr, n = round_like(float(rate.value) / COMPENSATE, rate.value), round_like(length.value * COMPENSATE, length.value)
    move = move_of(rate, "down", lr)
    return move.model_copy(update={"paired": move_of(length, "up", n)})


def compensations(code: str) -> list[TuningMove]:
    """Every compensating pair of `code`: one per learning-rate knob with a training length beside it."""
    knobs = find_knobs(code)
    return [compensating(k, p) for k in knobs if k.kind == "learning_rate" and (p := partner(knobs, k))]


def same_move(a: TuningMove, b: TuningMove) -> bool:
    """The two moves set the same knob to the same value."""
    return a.key == b.key and same_value(a.new, b.new)


def propose(code: str, tried: Sequence[tuple[str, TuningMove, str | None]], k: int) -> list[tuple[TuningMove, str]]:
    """Up to `k` moves for the round whose reference is `code`, one per knob, each with why it
    was chosen. `tried`: the topic's earlier moves as (idea name, move, verdict; None: not judged).

    1. A knob whose last move improved and still holds that move's value continues in the same
       direction (a line search that stops at the first move that does not improve).
    2. Then a knob whose last move made a significant decline (`decline`) tries the other direction:
       the decline shows the metric is sensitive to it, and on a one-peaked response the better
       value lies the other way (a compass search's second probe of the same coordinate).
    3. Then the knobs no move touched yet, by KIND_ORDER then file order, their first direction;
       the code's own literals and swaps before the library defaults it leaves unwritten (DEFAULTS).
    4. Then the other directions of knobs already moved (a `maintenance`: the knob mattered little).
    A value the knob already had in an earlier move (before or after it) is never proposed again.
    A learning rate with a training length beside it (`partner`) also gets a compensating pair
    (`_pair`): the rate 3x slower and the training 3x longer in one idea, after the other direction of a
    slower rate's decline, and continued like (1) while pairs improve.
    One move per knob (a pair holds both of its knobs), except that the places left after that go to a
    swap's other members."""
    by_key: dict[str, list[tuple[str, TuningMove, str | None]]] = {}
    for name, m, verdict in tried:
        by_key.setdefault(m.key, []).append((name, m, verdict))
    ranked: list[tuple[tuple, TuningMove, str]] = []
    knobs = find_knobs(code)
    for pos, knob in enumerate(knobs):
        history = by_key.get(knob.key, [])
        had = [x for _, m, _ in history for x in (m.old, m.new)]
        last_name, last, verdict = history[-1] if history else ("", None, None)
        improved = last is not None and verdict == "improvement" and same_value(knob.value, last.new)
        if pair := _pair(knobs, knob, history):
            # a continuing pair leads like a continuing move; a new one comes after the other direction of a
            # decline (one move per knob: a slower rate's decline gets the faster rate first, then the pair)
            ranked.append(((0, 0, pos) if pair[1].startswith("continues") else (0, 1, pos, 1), *pair))
        for j, (direction, value) in enumerate(moves(knob)):
            if any(same_value(value, x) for x in had):
                continue
            if improved and last.paired is None:
                if direction != last.direction:
                    continue
                rank, why = (0, 0, pos), f"continues {last_name} ({last.old_text} -> {last.new_text} improved)"
            elif last is not None and verdict == "decline" and direction != last.direction:
                rank, why = (0, 1, pos), (f"the other direction of {last_name} ({last.old_text} -> {last.new_text} "
                                          "declined: the metric is sensitive to this knob)")
            elif not history:
                rank, why = (1, knob.implicit, KIND_ORDER.index(knob.kind), j, pos), (
                    "first move on this knob" + (", a library default the code does not write" if knob.implicit
                                                 else ""))
            else:
                earlier = ", ".join(f"{m.new_text} ({v or 'not judged'})" for _, m, v in history)
                rank, why = (2, knob.implicit, KIND_ORDER.index(knob.kind), j, pos), \
                    f"earlier moves on this knob: {earlier}"
            ranked.append((rank, move_of(knob, direction, value), why))
    out, used = [], set()
    ranked.sort(key=lambda r: r[0])
    for _, move, why in ranked:
        keys = {move.key} | ({move.paired.key} if move.paired else set())
        if not keys & used and len(out) < k:
            used |= keys
            out.append((move, why))
    # a swap's other members are alternatives that do not depend on each other's verdicts (a numeric
    # knob's next step does): once every knob has its move, the places left go to them
    for _, move, why in ranked:
        if move.kind == "swap" and len(out) < k and all(move is not m for m, _ in out):
            out.append((move, why))
    return out


def _pair(knobs: Sequence[Knob], rate: Knob, history) -> tuple[TuningMove, str] | None:
    """The compensating pair of the learning rate `rate` (with why), when it is due: after a pair that
    improved and whose values the code still holds (a line search of pairs), or once a slower rate alone
    declined from the rate the code has now (the training was too short for it); never a pair tried before."""
    if rate.kind != "learning_rate" or (length := partner(knobs, rate)) is None:
        return None
    pair = compensating(rate, length)
    if any(m.paired is not None and same_value(m.new, pair.new) and same_value(m.paired.new, pair.paired.new)
           for _, m, _ in history):
        return None
    name, last, verdict = history[-1] if history else ("", None, None)
    what = (f"{pair.name} {pair.old_text} -> {pair.new_text} with {pair.paired.name} {pair.paired.old_text} -> "
            f"{pair.paired.new_text}")
    if last is not None and last.paired is not None and verdict == "improvement" and same_value(rate.value, last.new) \
            and same_value(length.value, last.paired.new):
        return pair, f"continues {name} (the pair {last.old_text} -> {last.new_text} improved): {what}"
    slower = [(n, m) for n, m, v in history
              if m.paired is None and m.direction == "down" and v == "decline" and same_value(m.old, rate.value)]
    if slower:
        n, m = slower[-1]
        return pair, (f"{n} ({m.old_text} -> {m.new_text} alone) declined: a slower rate needs longer training, "
                      f"so a compensating pair, {what} ({COMPENSATE}x each)")
    return None


@dataclass(frozen=True)
class Places:
    """How many of a round's places the tuning source's moves take, and why."""
    moves: int
    reason: str


def _rate(wins: int, runs: int) -> float:
    return (wins + 1) / (runs + 2)  # Laplace's rule: a kind not yet run counts as even


def tuning_places(feedback: Sequence, tuning_ids: set[str], base: int, budget: int, adapt: bool,
                  llm_sources: bool) -> Places:
    """The round's places for hyper-parameter moves (ideation.tuning_moves, ideation.tuning_adapt).

    Fixed: `base`. Adaptive (the default), once earlier rounds of the topic have verdicts: the budget
    is shared between the moves and the LLM's ideas in proportion to each kind's rate of verified
    improvements in this topic so far, (improvements + 1) / (ideas run + 2), rounded half up; never
    fewer than `base`, and while an LLM source is on, at least one place stays for its ideas. The
    loop's own verdicts decide, per topic, which kind of idea earns the places: nothing is fitted to
    a topic, and with an endpoint whose ideas win the share moves back to them. `feedback` is the
    earlier rounds' Feedback rows, `tuning_ids` the idea_ids that were moves."""
    top = budget - 1 if llm_sources else budget
    why = ("ideation.tuning_adapt is off" if not adapt else "no earlier verdicts" if not feedback else
           "the budget leaves no more" if top <= base else "")
    if why:
        return Places(base, f"{base} (ideation.tuning_moves): {why}")
    moves = [f for f in feedback if f.idea_id in tuning_ids]
    others = [f for f in feedback if f.idea_id not in tuning_ids]
    wins_m = sum(f.verdict == "improvement" for f in moves)
    wins_o = sum(f.verdict == "improvement" for f in others)
    rate_m, rate_o = _rate(wins_m, len(moves)), _rate(wins_o, len(others))
    share = rate_m / (rate_m + rate_o)
    n = min(top, max(base, math.floor(budget * share + 0.5)))
    return Places(n, f"{n} of {budget}: moves improved {wins_m}/{len(moves)}, the LLM's ideas {wins_o}/{len(others)} "
                     f"in earlier rounds (rates {rate_m:.2f} vs {rate_o:.2f} with one prior win and loss each)")
