"""The three-way merge of lines that carries an earlier win over onto a new reference code
(assets/ideas/merge.py): what merges, what clashes, and the edge cases of line ends."""
from assets.ideas.merge import merge3

BASE = ("import torch\nLR = 1e-3\n\n\ndef model():\n    return nn.Sequential(nn.Linear(8, 8), nn.ReLU())\n\n\n"
        "train(EPOCHS)\n")


def test_changes_of_different_lines_merge():
    ours = BASE.replace("LR = 1e-3", "LR = 1e-2")  # the next reference: a faster rate
    theirs = BASE.replace("nn.ReLU())", "nn.ReLU(), nn.Dropout(0.2))")  # the runner-up win: dropout
    merged = merge3(BASE, ours, theirs)
    assert merged == BASE.replace("LR = 1e-3", "LR = 1e-2").replace("nn.ReLU())", "nn.ReLU(), nn.Dropout(0.2))")
    # the merge is symmetric in the two sides
    assert merge3(BASE, theirs, ours) == merged


def test_insertions_and_deletions_merge():
    ours = BASE.replace("import torch\n", "import torch\nimport numpy as np\n")
    theirs = BASE.replace("\ntrain(EPOCHS)\n", "\nEPOCHS = 2\ntrain(EPOCHS)\nprint('done')\n")
    merged = merge3(BASE, ours, theirs)
    assert merged.startswith("import torch\nimport numpy as np\nLR")
    assert merged.endswith("train(EPOCHS)\nprint('done')\n")
    removed = BASE.replace("\n\ndef model", "\ndef model")  # a blank line removed far from the other change
    assert merge3(BASE, removed, theirs).count("\n") == theirs.count("\n") - 1


def test_the_same_change_on_both_sides_is_taken_once():
    ours = BASE.replace("LR = 1e-3", "LR = 1e-2")
    assert merge3(BASE, ours, ours) == ours
    assert merge3(BASE, ours, BASE) == ours and merge3(BASE, BASE, ours) == ours  # one side unchanged


def test_adjacent_changes_merge_in_the_base_order():
    ours = BASE.replace("LR = 1e-3", "LR = 1e-2")
    above = BASE.replace("import torch\n", "import torch as T\n")
    assert merge3(BASE, ours, above) == above.replace("LR = 1e-3", "LR = 1e-2")
    inserted = BASE.replace("LR = 1e-3\n", "LR = 1e-3\nWD = 1e-4\n")  # a line added right after the rewritten one
    assert merge3(BASE, ours, inserted) == BASE.replace("LR = 1e-3\n", "LR = 1e-2\nWD = 1e-4\n")


def test_overlapping_changes_clash():
    ours = BASE.replace("LR = 1e-3", "LR = 1e-2")
    assert merge3(BASE, ours, BASE.replace("LR = 1e-3", "LR = 3e-4")) is None  # the same line, differently
    # a line inserted inside lines the other side rewrote
    both = BASE.replace("import torch\nLR = 1e-3\n", "import torch as T\nLR = 1e-2\n")
    assert merge3(BASE, both, BASE.replace("import torch\n", "import torch\nimport math\n")) is None
    # two different insertions at one place: no order is safe to assume
    assert merge3(BASE, BASE + "a = 1\n", BASE + "b = 2\n") is None


def test_a_missing_last_newline_does_not_clash():
    base = BASE.rstrip("\n")
    ours = base.replace("LR = 1e-3", "LR = 1e-2")
    theirs = BASE.replace("nn.ReLU())", "nn.Tanh())")  # the other side keeps its last newline
    merged = merge3(base, ours, theirs)
    assert merged is not None and "LR = 1e-2" in merged and "nn.Tanh()" in merged and merged.endswith("train(EPOCHS)\n")
