"""Idea generation (DOLPHIN 3.1, its Fig. 5 in spirit): references, the code, the ideas tried
before and the ideas that worked; and a brainstorm path without papers (SciPIP's dual path).
Both prompts start with the same head (task + code) so the server's prefix cache reuses it."""
from collections.abc import Sequence

from assets.ideas.angles import untried_angles
from assets.shared.data_profile import data_section

SYSTEM = ("You are an ambitious but practical ML researcher. You propose small, concrete "
          "changes to an existing experiment that could improve its main metric, and which "
          "can be implemented by editing one short Python file.")


FIELDS = ("For each give Name (short snake_case), Title, Experiment (which part of the code to "
          "change and how), Summary (2-3 sentences), References ({refs}) and Builds_on (Names of "
          "earlier ideas listed above that it extends, may be empty). Each idea must be "
          "implementable in this file within the same training time.")


# when the topic's `tuning` source moves its hyper-parameters (assets/ideas/tuning.py), the LLM is
# asked for what that search cannot find: the local model otherwise copies the moves it sees
# ("Tune EPOCHS: 6 -> 7" after "Tune EPOCHS: 3 -> 6" improved, image topic, 2026-11-26)
TUNED = ("A separate search already tunes the values of the hyper-parameters (number of epochs, learning rate, "
         "batch size, layer widths, dropout rate, penalty strength): do not propose changing such a value. Each "
         "idea must change what the code computes: the model, the loss, the inputs, or how it trains.\n\n")


# when kept papers have method cards (corpus/method_cards.jsonl): the cards, then the request to apply one.
# A small model given a method in a few concrete lines writes that method; given abstracts alone it
# proposes generic changes. The code's own libraries stay the default: a card's call is one installed option.
CARD_FIELDS = (" When an idea applies a method card, give its paper id in method_card (else leave it empty); for "
               "every idea give code_place: the function, class or lines of this code it changes.")


def _cards(cards: Sequence[tuple[int, str, str]]) -> str:
    """The method cards of the numbered papers ((number, paper id, card text)) and how to use them."""
    if not cards:
        return ""
    lines = "\n".join(f"[{i}] {text}" for i, _, text in cards)
    return ("Method cards of some of these papers (what applying the method changes, what it suits, and a library "
            f"call that is installed here):\n{lines}\n"
            "Prefer ideas that apply one of these cards to this code, each a different card, adapted to what the "
            "code does now. Write the change with the libraries the code already uses, or with a card's library call "
            "when that call is the change; keep the code's framework (do not port it to another one), its data "
            "loading and its metric.\n\n")


def _head(title: str, description: str, metric: str, goal: str, code: str) -> str:
    return (f"Task: {title}\n{description.strip()}\nWe want to {goal} {metric}.\n\n"
            f"The experiment code:\n```python\n{code}\n```\n\n")


def _history(earlier: list[str], effective: list[str], analysis: str) -> str:
    before = "\n".join(f"- {e}" for e in earlier) or "(none yet)"
    good = "\n".join(f"- {e}" for e in effective) or "(none yet)"
    extra = f"\nWhat the last round taught us: {analysis}\n" if analysis else ""
    return (f"Ideas already tried (do not repeat them):\n{before}\n\n"
            f"Ideas that improved the result (you may build on them):\n{good}\n{extra}\n")


def generate(title: str, description: str, metric: str, goal: str, code: str, papers: list[tuple[int, str, str]],
             earlier: list[str], effective: list[str], n: int, analysis: str = "", angles: bool = True,
             tuned: bool = False, cards: Sequence[tuple[int, str, str]] = ()) -> list[dict]:
    """The ranking source's request; after the first round (`earlier` ideas) it names the
    directions no earlier idea took (`angles`); `tuned`: the topic's tuning source moves the
    hyper-parameters, so the ideas should not (TUNED); `cards`: (paper number, paper id, card text)
    of the numbered papers with a method card, shown after the papers with the request to apply
    one (each idea then names its card and the place in the code it changes)."""
    refs = "\n".join(f"[{i}] {t}: {s}" for i, t, s in papers) or "(none)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            _head(title, description, metric, goal, code)
            + f"Reference papers:\n{refs}\n\n"
            + _cards(cards)
            + _history(earlier, effective, analysis)
            + (_angles(earlier) if angles and earlier else "")
            + (TUNED if tuned else "")
            + f"Propose {n} different ideas. "
            + FIELDS.format(refs="numbers of the papers that inspired it, may be empty")
            + (CARD_FIELDS if cards else ""))},
    ]


def apply_card(title: str, description: str, metric: str, goal: str, code: str, card: str, earlier: list[str],
               data: str = "") -> list[dict]:
    """One idea that applies one method card (`card`: its prompt paragraph, resources/method_cards.py
    `card_text`) to this code, seen with its data (`data`: a data profile, may be empty). The same
    head as `generate` (task + code), so the server's prefix cache reuses it across the cards."""
    tried = "\n".join(f"- {e}" for e in earlier) or "(none yet)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            _head(title, description, metric, goal, code)
            + data_section(data) + ("\n" if data.strip() else "")
            + f"Ideas already tried on this task (do not repeat them):\n{tried}\n\n"
            + f"{card}\n\n"
            + "Apply this method to the experiment above, as one idea. Read the code first: where it already does "
              "part of what the card says, change what it does not do yet. Keep the code's framework, its data "
              "loading, its outputs and its metric. Answer with Title (what the change does), code_place (the "
              "function, class or lines of this code that change), Experiment (what those lines become: the call "
              "with its arguments, or the few new lines, and what else must change with them) and Summary (why "
              f"it should {goal} {metric} on this data, in two sentences).")},
    ]


def brainstorm(title: str, description: str, metric: str, goal: str, code: str,
               earlier: list[str], effective: list[str], n: int, analysis: str = "", tuned: bool = False) -> list[dict]:
    """The same request without any paper: ideas from the model's own understanding."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            _head(title, description, metric, goal, code)
            + _history(earlier, effective, analysis)
            + (_angles(earlier) if earlier else "")
            + (TUNED if tuned else "")
            + f"Without reading any paper, brainstorm {n} different ideas from your own understanding "
            "of the task and of this code: what limits the metric here, and what would lift it? "
            + FIELDS.format(refs="leave it empty"))},
    ]


def refill(title: str, description: str, metric: str, goal: str, code: str, papers: list[tuple[int, str, str]],
           earlier: list[str], effective: list[str], n: int, kept: list[str], dropped: list[str],
           analysis: str = "", tuned: bool = False, cards: Sequence[tuple[int, str, str]] = ()) -> list[dict]:
    """More ideas for a round whose filters left it short: `generate`'s request (same prefix, so
    the server reuses its cache) with this round's kept ideas and the dropped ones with why."""
    so_far = "\n".join(f"- {k}" for k in kept) or "(none)"
    gone = "\n".join(f"- {d}" for d in dropped) or "(none)"
    msgs = generate(title, description, metric, goal, code, papers, earlier, effective, n, analysis=analysis,
                    angles=False, tuned=tuned, cards=cards)
    ask = msgs[-1]["content"]
    cut = ask.index(f"Propose {n} different ideas")
    msgs[-1] = {"role": "user", "content": (
        ask[:cut]
        + f"This round already keeps these ideas:\n{so_far}\n\n"
        + "These ideas of this round were dropped by the filters, with the reason (a near-copy of an "
          "idea tried before, or already published); do not propose them again or anything close to them:\n"
        + f"{gone}\n\n"
        + "Each new idea must change a different part of the code or use a different mechanism than "
          "the ideas listed above. " + _angles(earlier + kept + dropped) + ask[cut:])}
    return msgs


def _angles(texts: list[str]) -> str:
    """The directions no earlier idea took (assets/ideas/angles.py), as a request to use them."""
    left = untried_angles(texts)
    if not left:
        return ""
    return ("Directions no idea of this topic has taken yet; take one of these per new idea (a different "
            "one for each):\n" + "\n".join(f"- {a}" for a in left) + "\n\n")


# -- SciPIP retrieval (assets/ideas/scipip.py) ------------------------------------------------

ENTITY_SYSTEM = "You pick out the key terms of a research text, exactly as the text names them."


def entities(title: str, text: str) -> list[dict]:
    """The key entities of one paper (or of the topic: title and description) for the SciPIP
    retrieval. Short on purpose: the local model reads every candidate paper once."""
    body = f"{title}. {text}" if title else text
    return [
        {"role": "system", "content": ENTITY_SYSTEM},
        {"role": "user", "content": (
            f"Text:\n{' '.join(body.split())[:700]}\n\n"
            "List the key entities of this text, at most 5, most specific first: the methods, models, "
            "tasks, datasets or techniques it is about. Each is a noun phrase of 1 to 4 words taken from "
            "the text; leave out generic words such as 'method', 'approach' or 'results'.")},
    ]


def scipip(title: str, description: str, metric: str, goal: str, code: str,
           papers: list[tuple[int, str, str, list[str]]], earlier: list[str], effective: list[str], n: int,
           analysis: str = "", tuned: bool = False) -> list[dict]:
    """Ideas from the papers the SciPIP retrieval found (numbered, with their key entities): the
    same head as `generate` (task + code), so the server's prefix cache reuses it."""
    refs = "\n".join(f"[{i}] {t} (key terms: {', '.join(e) or 'none'}): {s}" for i, t, s, e in papers) or "(none)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            _head(title, description, metric, goal, code)
            + "Retrieved papers (found by their meaning, the key terms they share with this task and "
              f"the papers cited with them; near-duplicates removed):\n{refs}\n\n"
            + _history(earlier, effective, analysis)
            + (_angles(earlier) if earlier else "")
            + (TUNED if tuned else "")
            + "Look in the retrieved papers for methods, tricks or findings that would carry over to this "
              f"code. Propose {n} different ideas, each adapting one of them (or combining two) to this "
              "experiment. "
            + FIELDS.format(refs="numbers of the retrieved papers it adapts"))},
    ]


# -- Chain-of-Ideas chains (assets/ideas/chains.py) -------------------------------------------

def _chain_line(i: int, year: int | None, title: str, abstract: str, how: str) -> str:
    rel = ""
    if how.startswith("cites"):
        rel = f" (cites {how.split()[-1]})"
    elif how:
        rel = f" (close in content to {how.split()[-1]}; no citation between them is known)"
    return f"[{i}] {year or 'year unknown'}: {title}{rel}\n    {' '.join(abstract.split())}"


def chain(title: str, description: str, metric: str, goal: str, code: str,
          papers: list[tuple[int, int | None, str, str, str]], earlier: list[str], effective: list[str], n: int,
          analysis: str = "", tuned: bool = False) -> list[dict]:
    """Ideas from one chain of papers read oldest first: the trend along it, the step that would
    come next, and ideas that take that step in this code. The same head as `generate` (task +
    code), so the server's prefix cache reuses it across the chains and the other sources."""
    lines = "\n".join(_chain_line(*p) for p in papers) or "(none)"
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            _head(title, description, metric, goal, code)
            + "A line of work in time order, oldest first; each paper is shown with how it relates to the "
              f"one before it:\n{lines}\n\n"
            + _history(earlier, effective, analysis)
            + (TUNED if tuned else "")
            + "Read the papers in order. Answer in three parts. trend: what each paper changed in the method "
              "compared with the one before it, one short sentence per step. prediction: the next step this line "
              "of work would take, in one or two sentences. ideas: "
            + f"{n} different ideas that take the predicted step (or a small part of it) in this experiment's "
              "code. "
            + FIELDS.format(refs="numbers of the chain's papers it draws on"))},
    ]
