"""A patch that only adds code nothing runs is not an implementation (issue 14): the shapes
the small model's patches take, on the shipped image-classification experiment."""

import pytest

from assets.patched_code.dead_code import dead_code_only, live_program
from tests.support import paths

ROOT = paths.REPO
CODE = (ROOT / "experiments/image_classification/experiment.py").read_text()
RUN = "python experiment.py --seed 0 --out_dir out"
TRAIN_STEP = "        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])\n"
MODEL_LINE = "model = SmallCNN(len(class_names))\n"

MIXUP = '''

def mixup(x, y, alpha=0.2):
    """Mix pairs of examples (Zhang et al. 2018)."""
    lam = float(np.random.beta(alpha, alpha))
    perm = torch.randperm(len(x))
    return lam * x + (1 - lam) * x[perm], y, y[perm], lam
'''


def _insert_after(code: str, anchor: str, text: str) -> str:
    assert anchor in code
    return code.replace(anchor, anchor + text, 1)


# -- dead: the file changed, the run did not ----------------------------------------------------

DEAD = {
    "unused helper function": _insert_after(CODE, MODEL_LINE, MIXUP),
    "unused class": _insert_after(CODE, MODEL_LINE, "\n\nclass LabelSmoothingLoss(nn.Module):\n"
                                  "    def __init__(self, eps=0.1):\n        super().__init__()\n"
                                  "        self.eps = eps\n\n    def forward(self, logits, y):\n"
                                  "        return F.cross_entropy(logits, y, label_smoothing=self.eps)\n"),
    "two helpers calling each other, none called": _insert_after(
        CODE, MODEL_LINE, MIXUP + "\n\ndef mixed_loss(logits, y):\n    x, ya, yb, lam = mixup(logits, y)\n"
        "    return lam * F.cross_entropy(x, ya) + (1 - lam) * F.cross_entropy(x, yb)\n"),
    "unused method added to the model": CODE.replace(
        "    def forward(self, x):  # x: [B, 1, 28, 28]\n",
        "    def init_weights(self):\n        for m in self.modules():\n"
        "            if isinstance(m, nn.Conv2d):\n                nn.init.kaiming_normal_(m.weight)\n\n"
        "    def forward(self, x):  # x: [B, 1, 28, 28]\n"),
    "branch under if False": _insert_after(CODE, TRAIN_STEP, "        if False:\n"
                                           "            loss = loss + 1e-4 * sum(p.pow(2).sum() for p in "
                                           "model.parameters())\n"),
    "flag the run command never passes": _insert_after(
        CODE.replace('parser.add_argument("--seed", type=int, default=0)\n',
                     'parser.add_argument("--seed", type=int, default=0)\n'
                     'parser.add_argument("--use_mixup", action="store_true")\n'),
        TRAIN_STEP, "        if args.use_mixup:\n            loss = loss * 0.5\n"),
    "unused constant and import": CODE.replace("import argparse, json, os, time\n",
                                               "import argparse, json, os, time\nimport random\n")
    .replace("LR = 1e-3\n", "LR = 1e-3\nMIXUP_ALPHA = 0.2  # for mixup\n"),
    "code after return": CODE.replace("        return self.head(self.features(x))\n",
                                      "        return self.head(self.features(x))\n"
                                      "        x = F.dropout(x, 0.5)\n"),
    "new docstring and comment only": CODE.replace('class SmallCNN(nn.Module):\n',
                                                   'class SmallCNN(nn.Module):\n    """Now with dropout."""\n'),
}


@pytest.mark.parametrize("shape", list(DEAD))
def test_an_edit_that_only_adds_code_nothing_runs_is_dead(shape):
    after = DEAD[shape]
    assert after != CODE
    compile(after, "experiment.py", "exec")  # a real, compiling patch
    reason = dead_code_only(CODE, after, RUN)
    assert reason is not None and "never runs" in reason, shape


def test_the_reason_names_what_was_added():
    reason = dead_code_only(CODE, DEAD["unused helper function"], RUN)
    assert "`mixup`" in reason and "nothing calls" in reason
    reason = dead_code_only(CODE, DEAD["flag the run command never passes"], RUN)
    assert "args.use_mixup" in reason
    assert "random" in dead_code_only(CODE, DEAD["unused constant and import"], RUN)


# -- live: the same additions, used ------------------------------------------------------------

LIVE = {
    "helper function called in the loop": _insert_after(CODE, MODEL_LINE, MIXUP).replace(
        TRAIN_STEP, "        xb, ya, yb, lam = mixup(x_train[idx], y_train[idx])\n"
        "        out = model(xb)\n"
        "        loss = lam * F.cross_entropy(out, ya) + (1 - lam) * F.cross_entropy(out, yb)\n"),
    "class used as the loss": _insert_after(CODE, MODEL_LINE, "\n\nclass Smooth(nn.Module):\n"
                                            "    def forward(self, logits, y):\n"
                                            "        return F.cross_entropy(logits, y, label_smoothing=0.1)\n"
                                            "\n\ncriterion = Smooth()\n").replace(
        TRAIN_STEP, "        loss = criterion(model(x_train[idx]), y_train[idx])\n"),
    "method called from __init__": CODE.replace(
        "    def forward(self, x):  # x: [B, 1, 28, 28]\n",
        "    def init_weights(self):\n        for m in self.modules():\n"
        "            if isinstance(m, nn.Conv2d):\n                nn.init.kaiming_normal_(m.weight)\n\n"
        "    def forward(self, x):  # x: [B, 1, 28, 28]\n").replace(
        "                                  nn.Linear(128, n_classes))\n",
        "                                  nn.Linear(128, n_classes))\n        self.init_weights()\n"),
    "changed constant": CODE.replace("EPOCHS = 3\n", "EPOCHS = 4\n"),
    "flag the command passes": _insert_after(
        CODE.replace('parser.add_argument("--seed", type=int, default=0)\n',
                     'parser.add_argument("--seed", type=int, default=0)\n'
                     'parser.add_argument("--use_mixup", action="store_true")\n'),
        TRAIN_STEP, "        if args.use_mixup:\n            loss = loss * 0.5\n"),
    "flag on by default": _insert_after(
        CODE.replace('parser.add_argument("--seed", type=int, default=0)\n',
                     'parser.add_argument("--seed", type=int, default=0)\n'
                     'parser.add_argument("--smooth", type=float, default=0.1)\n'),
        TRAIN_STEP, "        if args.smooth:\n            loss = loss * (1 - args.smooth)\n"),
    "new import used": CODE.replace("import argparse, json, os, time\n",
                                    "import argparse, json, os, time\nimport math\n")
    .replace("LR = 1e-3\n", "LR = math.sqrt(1e-6)\n"),
    "removed a layer": CODE.replace("nn.BatchNorm2d(c), ", ""),
    "new unused function plus a real change": _insert_after(CODE, MODEL_LINE, MIXUP).replace(
        "LR = 1e-3\n", "LR = 2e-3\n"),
}


@pytest.mark.parametrize("shape", list(LIVE))
def test_an_edit_that_changes_what_runs_is_live(shape):
    after = LIVE[shape]
    compile(after, "experiment.py", "exec")
    cmd = RUN + " --use_mixup" if shape == "flag the command passes" else RUN
    assert dead_code_only(CODE, after, cmd) is None, shape


def test_without_the_command_flags_are_not_folded():
    after = DEAD["flag the run command never passes"]
    assert dead_code_only(CODE, after, None) is None  # it might be passed: not called dead
    assert dead_code_only(CODE, DEAD["branch under if False"], None) is not None


def test_the_baseline_itself_keeps_its_program():
    live = live_program(CODE, RUN.split())
    assert live is not None and "train_step" not in live.dropped
    # the reference uses everything it defines: nothing is dropped but the dry-run and screen branches
    assert live.dropped and all("dry_run" in d or "screen" in d for d in live.dropped), live.dropped
    assert live_program("def (:\n") is None and dead_code_only(CODE, "def (:\n", RUN) is None


def test_decorated_and_referenced_by_string_stay():
    base = "import torch\nx = torch.zeros(3)\nprint(x)\n"
    registered = base + "\n@torch.jit.script\ndef f(x):\n    return x\n"
    assert dead_code_only(base, registered) is None  # a decorator may register it
    by_name = base + "\ndef g():\n    return 1\n\nprint(globals()['g']())\n"
    assert dead_code_only(base, by_name) is None
    recursive = base + "\ndef h(n):\n    return 1 if n < 1 else h(n - 1)\n"
    assert dead_code_only(base, recursive) is not None  # calling itself is not a use
