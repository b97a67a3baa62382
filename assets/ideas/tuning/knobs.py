"""The knobs of a round's code for the `tuning` idea source, found without the LLM.

A *knob* is a numeric literal the code sets under a conventional hyper-parameter name: a
top-level or function-level constant (`EPOCHS = 4`), an argparse default (`--lr ... default=1e-3`),
a keyword argument (`Adam(..., lr=1e-3)`, `Ridge(alpha=1.0)`), a function's default argument, a
class field (a dataclass config) or a dict entry with a string key (`{"learning_rate": 0.1}`).
Only names of known kinds count (learning rate, training length, width, depth, dropout, weight
decay, penalty, batch size, label smoothing); seeds, data sizes, splits and anything unnamed are
never touched, so a move cannot change what the evaluation measures. The knob kinds are generic
conventions of ML code, not fitted to the shipped topics.

A *swap* (`find_swaps`, kind "swap") is a knob too: the member of a known family of classes or
functions the code calls (Ridge among scikit-learn's linear models, Adam or AdamW, ReLU/GELU/SiLU),
moved to a sibling that takes the same arguments. A *library default* (`find_defaults`, `DEFAULTS`)
is a knob as well: a keyword every call of a known estimator or optimiser leaves unwritten, at the
library's documented default, which a move writes into the calls."""
from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

MODULE = "<module>"

# knob kinds, in the order untried knobs are proposed: how long and how fast it learns first
# (short baselines are the common case), then capacity, then regularisation, then the rest
KIND_ORDER = ("training_length", "learning_rate", "width", "dropout", "weight_decay", "penalty", "depth",
              "label_smoothing", "batch_size", "swap")

_NAMES = {
    "training_length": r"(n_|num_|max_|total_|train_)?(epochs?|iters?|iterations|steps|estimators|boost_rounds?|"
                       r"rounds|max_iter)|n_estimators|num_boost_round|max_iter",
    "learning_rate": r"(base_|max_|init_|initial_)?(lr|learning_rate|eta)0?|learning_rate_init",
    "width": r"(n_|num_)?(hidden|hidden_dim|hidden_size|hidden_units|hid|embed_dim|emb_dim|embedding_dim|embed_size|"
             r"embedding_size|d_model|n_embd|width|channels|filters|units|latent_dim|feat_dim|hidden_channels|leaves)",
    "depth": r"(n_|num_)?(layers?|blocks|depth)|max_depth|n_layer",
    "dropout": r"dropout(_p|_rate|_prob)?|drop_rate|p_drop|drop_prob",
    "weight_decay": r"weight_decay|wd|l2(_reg|_penalty)?",
    "penalty": r"alpha|c|reg_lambda|reg_alpha|lambda_?|lam",
    "label_smoothing": r"label_smoothing|smoothing",
    "batch_size": r"(train_)?(batch_size|bs)|batch",
}
_KIND_OF = [(k, re.compile(rf"^(?:{p})$")) for k, p in _NAMES.items()]
INT_KINDS = {"training_length", "width", "depth", "batch_size"}
_FLOAT_KINDS = {"learning_rate", "dropout", "weight_decay", "label_smoothing"}


def knob_kind(name: str, value: float | int) -> str | None:
    """The kind of a knob named `name` holding `value`, or None when it is not one: the name must
    match a kind (case-insensitive, dashes as underscores) and the value suit it (whole numbers for
    lengths and sizes, a probability for dropout and smoothing)."""
    n = name.lower().lstrip("-").replace("-", "_")
    for kind, rx in _KIND_OF:
        if not rx.match(n):
            continue
        if kind in INT_KINDS and not (isinstance(value, int) and value >= 1):
            return None
        if kind in _FLOAT_KINDS and not isinstance(value, float) and value != 0:
            return None
        if kind in ("dropout", "label_smoothing") and not 0 <= value < 1:
            return None
        if kind in ("learning_rate", "penalty") and value <= 0:
            return None
        return kind
    return None


@dataclass(frozen=True)
class Knob:
    key: str        # the same knob in the code of a later round: "EPOCHS", "--lr", "Adam(lr=)"
    name: str       # the identifier: "EPOCHS", "lr"
    kind: str
    value: float | int
    line: int       # 1-based line of the literal (a literal on one line only)
    col: int        # byte offsets of the literal on that line (ast's)
    end_col: int
    where: str      # for people: "the top-level constant EPOCHS (line 26)"
    function: str   # the top-level definition it is in, or MODULE
    text: str       # the literal as written: "5e-3"; a swap: the class or function called ("Ridge")
    # a swap only (kind "swap"; value: the called member's index in its family, see SWAPS)
    # (line, col, end_col) of every call's name (a swap), or of every literal (a keyword written with the same
    # value in several calls of one callee: one knob, all of them move together); () : the one literal above
    sites: tuple[tuple[int, int, int], ...] = ()
    module: str = ""                              # the module the name is imported from ("" : an attribute)
    choices: tuple[int, ...] = ()                 # the members every call can take, in the order to try them
    # an unwritten keyword only (see DEFAULTS): the library's default stands in for the literal, and a move
    # writes `name=value` into every call at its site; `commas`: per site, whether the call has arguments
    implicit: bool = False
    commas: tuple[bool, ...] = ()


def _number(node: ast.AST) -> float | int | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.lineno == node.end_lineno:
        return node.value
    return None


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "call"


# Swaps: a call of a known class or function replaced by a sibling with the same role, where every
# call's arguments suit the sibling. Families and their order are library conventions, not fitted to a
# topic: scikit-learn's linear models in its user guide's order (least squares, ridge, lasso, elastic-net,
# then robust regression), its forests (random, extremely randomised trees), Adam with coupled or
# decoupled weight decay, and the common activations. From the current member the later ones are tried
# first, then the earlier ones. Per family: (label, members, positional arguments allowed, the keyword
# arguments each member accepts; None: any the family's members share).
_LINEAR = {"LinearRegression": {"fit_intercept", "copy_X", "n_jobs", "positive"},
           "Ridge": {"alpha", "fit_intercept", "copy_X", "max_iter", "tol", "solver", "positive", "random_state"},
           "Lasso": {"alpha", "fit_intercept", "precompute", "copy_X", "max_iter", "tol", "warm_start", "positive",
                     "random_state", "selection"},
           "ElasticNet": {"alpha", "l1_ratio", "fit_intercept", "precompute", "max_iter", "copy_X", "tol",
                          "warm_start", "positive", "random_state", "selection"},
           "HuberRegressor": {"epsilon", "max_iter", "alpha", "warm_start", "fit_intercept", "tol"}}
SWAPS: dict[str, tuple[str, tuple[str, ...], int, dict[str, set[str]] | None]] = {
    "linear_model": ("linear model", tuple(_LINEAR), 0, _LINEAR),
    "forest_regressor": ("forest", ("RandomForestRegressor", "ExtraTreesRegressor"), 0, None),
    "forest_classifier": ("forest", ("RandomForestClassifier", "ExtraTreesClassifier"), 0, None),
    "adam": ("optimiser", ("Adam", "AdamW"), 2, None),
    "activation_module": ("activation", ("ReLU", "GELU", "SiLU"), 0,
                          {"ReLU": {"inplace"}, "GELU": {"approximate"}, "SiLU": {"inplace"}}),
    "activation": ("activation", ("relu", "gelu", "silu"), 1,
                   {"relu": {"input", "inplace"}, "gelu": {"input", "approximate"}, "silu": {"input", "inplace"}}),
}
_FAMILY_OF = {m: f for f, (_, members, _, _) in SWAPS.items() for m in members}


def _suits(calls: Sequence[ast.Call], positional: int, accepts: set[str] | None) -> bool:
    """Whether every call's arguments suit a member taking `positional` positional arguments and the
    keywords `accepts` (None: any)."""
    return all(len(c.args) <= positional and not any(k.arg is None for k in c.keywords)
               and (accepts is None or all(k.arg in accepts for k in c.keywords)) for c in calls)


def _imported(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Names bound by `from M import name [as alias]`: local name -> (M, name)."""
    return {a.asname or a.name: (node.module or "", a.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0 for a in node.names}


def _library_calls(tree: ast.Module, names) -> dict[str, list[tuple[ast.Call, str]]]:
    """Per name in `names`, the calls of it with the top-level definition each is in: called by the
    name imported under itself with `from M import name`, or as an attribute (`nn.ReLU`,
    `torch.optim.Adam`), never a local function of that name."""
    imported = _imported(tree)
    calls: dict[str, list[tuple[ast.Call, str]]] = {}
    for top in tree.body:
        function = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else MODULE
        for node in ast.walk(top):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in names and imported.get(f.id, ("", ""))[1] == f.id:
                    calls.setdefault(f.id, []).append((node, function))
                elif isinstance(f, ast.Attribute) and f.attr in names and isinstance(f.value, (ast.Name,
                                                                                               ast.Attribute)):
                    calls.setdefault(f.attr, []).append((node, function))
    return calls


def find_swaps(code: str, tree: ast.Module | None = None) -> list[Knob]:
    """The swap knobs of `code`: per family (SWAPS), the calls of its members, when they all call the
    same member, by a name imported with `from M import name` or as a module's attribute (`nn.ReLU`),
    and at least one sibling suits every call's arguments."""
    try:
        tree = tree or ast.parse(code)
    except SyntaxError:
        return []
    imported = _imported(tree)
    calls: dict[str, list[tuple[ast.Call, str]]] = {}
    for name, found in _library_calls(tree, _FAMILY_OF).items():
        calls.setdefault(_FAMILY_OF[name], []).extend(found)
    out = []
    for family, found in calls.items():
        label, members, positional, accepts = SWAPS[family]
        names = {_callee(c) for c, _ in found}
        if len(names) != 1:
            continue
        member = names.pop()
        bare = isinstance(found[0][0].func, ast.Name)
        if any(isinstance(c.func, ast.Name) != bare for c, _ in found):
            continue
        i = members.index(member)
        calls_ = [c for c, _ in found]
        choices = tuple(j for j in [*range(i + 1, len(members)), *range(i)]
                        if _suits(calls_, positional, (accepts or {}).get(members[j])))
        if not choices:
            continue
        sites = []
        for c, _ in found:
            f = c.func
            if bare:
                sites.append((f.lineno, f.col_offset, f.end_col_offset))
            else:  # the attribute's name is the last len(attr) bytes of the expression
                sites.append((f.end_lineno, f.end_col_offset - len(f.attr.encode()), f.end_col_offset))
        first, function = found[0]
        where = f"the {label} {member}() ({len(found)} call{'s' if len(found) > 1 else ''}, line {first.lineno})"
        out.append(Knob(f"{family}()", label, "swap", i, first.lineno, sites[0][1], sites[0][2], where, function,
                        member, tuple(sites), imported[member][0] if bare else "", choices))
    return out


# Library defaults a call leaves unwritten: a keyword the call does not pass is a knob at the
# library's documented default (scikit-learn 1.x, XGBoost 2.x, LightGBM 4.x, torch.optim), so a
# baseline that calls `RandomForestRegressor()` or `HuberRegressor()` with no arguments still has
# its most common hyper-parameters to move. Per callee: (positional arguments the call may pass,
# {keyword: default}); only keywords whose names are knobs of a kind (`knob_kind`).
_TREES = {"n_estimators": 100}
_BOOSTING = {"n_estimators": 100, "learning_rate": 0.1, "max_depth": 3}
DEFAULTS: dict[str, tuple[int, dict[str, float | int]]] = {
    **{m: (0, {"alpha": 1.0}) for m in ("Ridge", "Lasso", "ElasticNet", "RidgeClassifier")},
    "HuberRegressor": (0, {"alpha": 0.0001, "max_iter": 100}),
    "LogisticRegression": (0, {"C": 1.0, "max_iter": 100}),
    **{m: (0, {"C": 1.0}) for m in ("SVC", "SVR", "LinearSVC", "LinearSVR")},
    **{m: (0, _TREES) for m in ("RandomForestRegressor", "RandomForestClassifier", "ExtraTreesRegressor",
                                "ExtraTreesClassifier")},
    **{m: (0, _BOOSTING) for m in ("GradientBoostingRegressor", "GradientBoostingClassifier")},
    **{m: (0, {"learning_rate": 0.1, "max_iter": 100}) for m in ("HistGradientBoostingRegressor",
                                                                  "HistGradientBoostingClassifier")},
    **{m: (0, {"alpha": 0.0001, "max_iter": 200, "learning_rate_init": 0.001}) for m in ("MLPRegressor",
                                                                                          "MLPClassifier")},
    **{m: (0, {"n_estimators": 100, "learning_rate": 0.3, "max_depth": 6}) for m in ("XGBRegressor",
                                                                                       "XGBClassifier")},
    **{m: (0, {"n_estimators": 100, "learning_rate": 0.1, "num_leaves": 31}) for m in ("LGBMRegressor",
                                                                                         "LGBMClassifier")},
    "Adam": (1, {"lr": 0.001, "weight_decay": 0.0}),
    "AdamW": (1, {"lr": 0.001, "weight_decay": 0.01}),
}


def find_defaults(tree: ast.Module, written: set[str]) -> list[Knob]:
    """The unwritten keywords of `tree`'s calls of DEFAULTS' callees, as knobs at the library's
    default: the callee called by a name imported with `from M import name` or as an attribute,
    every call without `**kwargs`, with no more positional arguments than its entry allows and without
    that keyword (one knob for all the calls: a move writes it into each), and no knob in `written`
    (the keys found in the code) covering it."""
    out = []
    for callee, found in _library_calls(tree, DEFAULTS).items():
        positional, defaults = DEFAULTS[callee]
        nodes = [c for c, _ in found]
        if any(len(c.args) > positional or any(k.arg is None for k in c.keywords) for c in nodes):
            continue
        sites, commas = [], []
        for c in nodes:  # after the last argument, or just before the `)` of an empty call
            last = max(((a.end_lineno, a.end_col_offset) for a in [*c.args, *c.keywords]), default=None)
            line, col = last or (c.end_lineno, c.end_col_offset - 1)
            sites.append((line, col, col))
            commas.append(last is not None)
        first, function = found[0]
        calls_ = f"{len(nodes)} calls, " if len(nodes) > 1 else ""
        for name, value in defaults.items():
            key = f"{callee}({name}=)"
            if any(name in {k.arg for k in c.keywords} for c in nodes) or key in written \
                    or knob_kind(name, value) is None:
                continue
            text = as_literal(value, value)
            out.append(Knob(key, name, knob_kind(name, value), value, sites[0][0], sites[0][1], sites[0][2],
                            f"{name}= of {callee}() ({calls_}line {first.lineno}; not written: the library "
                            f"default {text})", function, text, sites=tuple(sites), implicit=True,
                            commas=tuple(commas)))
    return out


def find_knobs(code: str) -> list[Knob]:
    """The knobs of `code` in file order ([] when it does not parse), the swaps (`find_swaps`)
    among them. A name assigned more than
    once in one body counts at its first assignment only (a later `EPOCHS = 1` under `--dry_run`
    sits in an `if`, which is not searched: only direct statements of the module and of
    functions are)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found: list[Knob] = []
    keys: dict[str, int] = {}
    keyword_keys: set[str] = set()
    lines = source_lines(code)

    def add(key: str, name: str, node: ast.AST, where: str, function: str, keyword: bool = False) -> None:
        value = _number(node)
        kind = knob_kind(name, value) if value is not None else None
        if kind is None or (name.lower() == "c" and not keyword):  # a bare `c` is a counter; `C=` is a penalty
            return
        n = keys.get(key, 0)
        keys[key] = n + 1
        text = lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode()
        found.append(Knob(key if n == 0 else f"{key}#{n + 1}", name, kind, value, node.lineno, node.col_offset,
                          node.end_col_offset, f"{where} (line {node.lineno})", function, text))

    def body_assigns(body: Sequence[ast.stmt], scope: str, function: str, label: str = "variable") -> None:
        seen: set[str] = set()
        for st in body:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) \
                else []
            if len(targets) != 1 or st.value is None:
                continue
            t, v = targets[0], st.value
            if isinstance(t, ast.Name):
                pairs = [(t, v)]
            elif isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
                pairs = list(zip(t.elts, v.elts))  # epochs, batch_size, lr = 10, 32, 1e-3
            else:
                continue
            for target, value in pairs:
                if isinstance(target, ast.Name) and target.id not in seen:
                    name = target.id
                    seen.add(name)
                    where = (f"the top-level constant {name}" if scope == MODULE else
                             f"the field {name} of class {scope}" if label == "field" else
                             f"the variable {name} of {scope}()")
                    add(name if scope == MODULE else f"{scope}.{name}", name, value, where, function)

    def defaults(node: ast.FunctionDef | ast.AsyncFunctionDef, function: str) -> None:
        a = node.args
        pos = a.posonlyargs + a.args
        pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
        for arg, d in pairs:
            if d is not None:
                add(f"{node.name}({arg.arg}=)", arg.arg, d, f"the default of {arg.arg} in {node.name}()", function)

    def call(node: ast.Call, function: str) -> None:
        callee = _callee(node)
        first = node.args[0] if node.args else None
        if callee == "add_argument":
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("-"):
                for kw in node.keywords:
                    if kw.arg == "default":
                        add(first.value, first.value.lstrip("-"), kw.value, f"the default of {first.value}", function)
            return
        if callee.endswith("Dropout") and first is not None:  # nn.Dropout(0.3): its probability is positional
            add(f"{callee}()", "dropout", first, f"the probability of {callee}()", function)
        for kw in node.keywords:
            if kw.arg == "p" and callee.endswith("Dropout"):
                add(f"{callee}(p=)", "dropout", kw.value, f"p= of {callee}()", function)
            elif kw.arg:
                keyword_keys.add(f"{callee}({kw.arg}=)")
                add(f"{callee}({kw.arg}=)", kw.arg, kw.value, f"{kw.arg}= of {callee}()", function, keyword=True)

    body_assigns(tree.body, MODULE, MODULE)
    for top in tree.body:
        function = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else MODULE
        for node in ast.walk(top):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body_assigns(node.body, node.name, function)
                defaults(node, function)
            elif isinstance(node, ast.ClassDef):  # @dataclass class Config: lr: float = 1e-3
                body_assigns(node.body, node.name, function, label="field")
            elif isinstance(node, ast.Call):
                call(node, function)
            elif isinstance(node, ast.Dict):  # params = {"learning_rate": 0.1, "num_leaves": 31}
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        add(f'["{key.value}"]', key.value, value, f'the "{key.value}" entry of a dict', function)
    found = _one_per_keyword(found, keyword_keys)
    found += find_swaps(code, tree)
    return sorted(found + find_defaults(tree, {k.key.split("#")[0] for k in found}),
                  key=lambda k: (k.line, k.col, k.implicit))


def _one_per_keyword(found: list[Knob], keyword_keys: set[str]) -> list[Knob]:
    """A keyword a callee is given with the same value in several calls (`Ridge(alpha=1.0)` in a
    cross-validation and in the final fit) as one knob whose sites are all those literals, so that a move
    changes every call alike; with different values, each call's literal stays its own knob (`key#2`...)."""
    groups: dict[str, list[Knob]] = {}
    for k in found:
        groups.setdefault(k.key.split("#")[0], []).append(k)
    out = []
    for key, ks in groups.items():
        if len(ks) > 1 and key in keyword_keys and all(same_value(k.value, ks[0].value) for k in ks):
            first = ks[0]
            out.append(Knob(key, first.name, first.kind, first.value, first.line, first.col, first.end_col,
                            f"{first.where.rsplit(' (line', 1)[0]} ({len(ks)} calls, line {first.line})",
                            first.function, first.text, sites=tuple((k.line, k.col, k.end_col) for k in ks)))
        else:
            out.extend(ks)
    return out


def as_literal(value: float | int, like: float | int) -> str:
    """`value` written as a literal of `like`'s type: 3 for ints, 0.015 or 3e-05 for floats."""
    if isinstance(like, int):
        return str(int(value))
    text = f"{value:.3g}"
    return text if any(c in text for c in ".en") else text + ".0"


def round_like(value: float, like: float | int) -> float | int:
    """`value` as a number of `like`'s type, rounded as `as_literal` writes it."""
    return int(round(value)) if isinstance(like, int) else float(as_literal(value, 0.0))


def source_lines(code: str) -> list[str]:
    """`code`'s lines as the parser numbers them (ends kept): split at \\n, \\r\\n and \\r only,
    not at the form feeds and other breaks str.splitlines also splits at."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", code)


def same_value(a: float, b: float) -> bool:
    """The two knob values are equal up to the rounding of a literal read back from the code."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
