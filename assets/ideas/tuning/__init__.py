"""The `tuning` idea source (topic.yaml `ideation.sources: [..., tuning]`): ideas that move one
hyper-parameter of the round's code, found and changed without the LLM.

- knobs.py: what a knob is and where the code has them (`find_knobs`: named literals, swaps of a
  library family's member, unwritten library defaults);
- edits.py: a move applied to the code (`apply_move`) and two versions of the code read back as
  moves (`knob_changes`);
- policy.py: which moves a round proposes (`moves`, `propose`, compensating pairs) and how many
  of the round's places they take (`tuning_places`)."""
from __future__ import annotations

from assets.ideas.tuning.edits import apply_move, knob_changes, move_of
from assets.ideas.tuning.knobs import (
    DEFAULTS,
    KIND_ORDER,
    MODULE,
    SWAPS,
    Knob,
    find_defaults,
    find_knobs,
    find_swaps,
    knob_kind,
    source_lines,
)
from assets.ideas.tuning.policy import (
    COMPENSATE,
    Places,
    compensating,
    compensations,
    moves,
    partner,
    propose,
    same_move,
    tuning_places,
)

__all__ = [
    "COMPENSATE", "DEFAULTS", "KIND_ORDER", "MODULE", "SWAPS", "Knob", "Places", "apply_move", "compensating",
    "compensations", "find_defaults", "find_knobs", "find_swaps", "knob_changes", "knob_kind", "move_of", "moves",
    "partner", "propose", "same_move", "source_lines", "tuning_places",
]
