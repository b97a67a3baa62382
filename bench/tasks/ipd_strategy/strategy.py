"""A strategy for the noisy iterated prisoner's dilemma (the file the loop edits).

The evaluator (evaluate.py) imports this file in a process of its own and calls `next_move` once
per round of each match against a fixed set of classic opponents. Moves are "C" (cooperate) and
"D" (defect); payoffs per round: both C 3/3, both D 1/1, D against C 5/0. Each intended move is
flipped with probability 0.05 (noise), and a match lasts an unknown number of rounds.

Baseline: tit for tat (Rapoport): cooperate first, then play the opponent's previous move.
"""


def next_move(history):
    """The move for this round: "C" or "D".

    history: the rounds of this match played so far, oldest first, as (my_move, their_move)
    pairs of the moves actually played (after noise); empty in the first round.
    """
    if not history:
        return "C"
    return history[-1][1]
