"""The evaluator of the strategy: a noisy iterated prisoner's dilemma tournament of the strategy in
strategy.py against a fixed set of classic opponents (after Axelrod's tournaments), scored as the
strategy's mean payoff per round.

    python evaluate.py --seed S --out_dir D                        # the run: writes D/strategy.py
    python evaluate.py --strategy P --seed S --out_dir D           # the score of the strategy file P

The strategy runs in a process of its own and answers one move per line over a pipe, so it can
neither read nor change the evaluator's state; what it prints goes to stderr. The seed fixes the
match lengths, the noise, the random opponents and the strategy's own `random` module. The scores
are written to D/final_info.json: mean_payoff (over all matches, each weighted equally) and the
mean payoff against each opponent. The run copies the strategy file it played to D/strategy.py,
which the topic's scorer plays again in a fresh sandbox.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

NOISE = 0.05            # chance that an intended move is flipped
ROUNDS = (150, 250)     # a match's length is drawn from this range (both ends included)
MATCHES = 2             # matches against each opponent
PAYOFF = {("C", "C"): (3, 3), ("C", "D"): (0, 5), ("D", "C"): (5, 0), ("D", "D"): (1, 1)}
FLIP = {"C": "D", "D": "C"}


# -- the opponents: (their own history as (my_move, their_move) pairs, a seeded Random) -> move ----

def always_cooperate(h, rng):
    return "C"


def always_defect(h, rng):
    return "D"


def tit_for_tat(h, rng):
    return h[-1][1] if h else "C"


def tit_for_two_tats(h, rng):
    return "D" if len(h) >= 2 and h[-1][1] == h[-2][1] == "D" else "C"


def suspicious_tit_for_tat(h, rng):
    return h[-1][1] if h else "D"


def grudger(h, rng):  # Friedman: cooperates until the other side defects once, then defects for ever
    return "D" if any(t == "D" for _, t in h) else "C"


def win_stay_lose_shift(h, rng):  # Pavlov: repeat the last move after a payoff of 3 or 5, else switch
    if not h:
        return "C"
    mine, theirs = h[-1]
    return mine if theirs == "C" else FLIP[mine]


def random_player(h, rng):
    return "C" if rng.random() < 0.5 else "D"


def alternator(h, rng):
    return "C" if len(h) % 2 == 0 else "D"


def joss(h, rng):  # tit for tat that defects instead of cooperating one time in ten
    move = h[-1][1] if h else "C"
    return "D" if move == "C" and rng.random() < 0.1 else move


OPPONENTS = [always_cooperate, always_defect, tit_for_tat, tit_for_two_tats, suspicious_tit_for_tat, grudger,
             win_stay_lose_shift, random_player, alternator, joss]

# the strategy's side of the pipe: "N <seed>" starts a match, "M" asks for the first move and
# "M xy" adds the last round (x: the strategy's move as played, y: the opponent's) and asks again
WORKER = r'''
import importlib.util, os, random, sys
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # whatever the strategy prints goes to stderr, not into the protocol
spec = importlib.util.spec_from_file_location("strategy", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
history = []
for line in sys.stdin:
    parts = line.split()
    if parts[0] == "N":
        history = []
        random.seed(int(parts[1]))
        continue
    if len(parts) > 1:
        history.append((parts[1][0], parts[1][1]))
    move = module.next_move(list(history))
    if move not in ("C", "D"):
        sys.exit(f"next_move returned {move!r} in round {len(history) + 1}: it must return 'C' or 'D'")
    answers.write(move + "\n")
    answers.flush()
'''


class Player:
    """The strategy in its own process."""

    def __init__(self, path):
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line):
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.fail()

    def move(self, last):
        self.send("M" + (f" {last[0]}{last[1]}" if last else ""))
        answer = self.proc.stdout.readline().strip()
        if answer not in ("C", "D"):
            self.fail()
        return answer

    def fail(self):
        code = self.proc.wait()
        sys.exit(f"the strategy's process ended (exit code {code}) without answering a move: see its error above")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def play(player, opponent, rounds, rng):
    """One match: the strategy's mean payoff per round."""
    mine, theirs = [], []  # each side's history as (own move, other's move), moves as played
    total = 0
    for _ in range(rounds):
        a = player.move(mine[-1] if mine else None)
        b = opponent(theirs, rng)
        a = FLIP[a] if rng.random() < NOISE else a
        b = FLIP[b] if rng.random() < NOISE else b
        total += PAYOFF[(a, b)][0]
        mine.append((a, b))
        theirs.append((b, a))
    return total / rounds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="strategy.py")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out_dir", required=True)
    args = parser.parse_args()
    if not os.path.isfile(args.strategy):
        sys.exit(f"no strategy file {args.strategy}")
    os.makedirs(args.out_dir, exist_ok=True)
    kept = os.path.join(args.out_dir, "strategy.py")
    if os.path.abspath(kept) != os.path.abspath(args.strategy):
        shutil.copyfile(args.strategy, kept)  # what the scorer plays again

    rng = random.Random(args.seed)
    player = Player(args.strategy)
    per_opponent = {}
    for opponent in OPPONENTS:
        scores = []
        for _ in range(MATCHES):
            player.send(f"N {rng.randrange(2 ** 31)}")
            scores.append(play(player, opponent, rng.randint(*ROUNDS), rng))
        per_opponent[opponent.__name__] = sum(scores) / len(scores)
        print(f"against {opponent.__name__}: {per_opponent[opponent.__name__]:.3f} per round", flush=True)
    player.close()
    info = {"mean_payoff": sum(per_opponent.values()) / len(per_opponent),
            **{f"vs_{k}": v for k, v in per_opponent.items()}}
    with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(f"mean payoff per round: {info['mean_payoff']:.4f}")


if __name__ == "__main__":
    main()
