"""Planning: the kept ideas of a round and one detailed plan each, naming the definitions of
the file it changes (the changed-definitions patch format asks for exactly those)."""
import ast
import re

import polars as pl

from assets.experiment_plans import prompts as plan_prompts
from assets.shared.data_profile import topic_data
from resources.llm import LLM
from schemas.frames import from_frame
from schemas.llm_outputs import PlanDraft
from schemas.records import ExperimentPlan, FilteredIdea
from schemas.topic import TopicSpec

MODULE = "<module>"  # the file's top-level statements (config constants, the training loop of a script)
# words that point at a script's top-level code rather than at one of its definitions
_TOP_LEVEL_WORDS = re.compile(r"\b(top[- ]level|module[- ]level|training loop|main loop|the loop|script|"
                              r"hyper-?parameters?|config(uration)?|constants?|optimi[sz]er|learning rate)\b", re.I)


def definitions(code: str) -> dict[str, list[str]]:
    """The file's top-level functions and classes (name -> its methods), and MODULE -> the
    names its top-level statements assign; {} when it does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    out: dict[str, list[str]] = {}
    assigned: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = []
        elif isinstance(node, ast.ClassDef):
            out[node.name] = [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    out[MODULE] = list(dict.fromkeys(assigned))
    return out


def describe_definitions(code: str) -> str:
    """One line per definition for the plan prompt, e.g. "SmallCNN (class: __init__, forward)"."""
    defs = definitions(code)
    lines = [f"- {name} (" + (f"class: {', '.join(methods)}" if methods else "function") + ")"
             for name, methods in defs.items() if name != MODULE]
    if defs.get(MODULE):
        lines.append(f"- {MODULE}: the top-level statements (assigning {', '.join(defs[MODULE][:12])})")
    return "\n".join(lines)


def _words(text: str) -> set[str]:
    """The identifiers a text mentions."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def plan_functions(code: str, *texts: str) -> list[str]:
    """The definitions of `code` the plan's texts name (a word match of a function, class or
    method name; a method stands for its class), in file order, and MODULE when they name a
    top-level variable or the script's top-level code."""
    defs = definitions(code)
    text = "\n".join(texts)
    words = _words(text.replace(MODULE, " __module__ "))
    hit = []
    for name, methods in defs.items():
        if name == MODULE:
            if "__module__" in words or words & set(methods) or _TOP_LEVEL_WORDS.search(text):
                hit.append(name)
        elif name in words or (words & {m for m in methods if not m.startswith("__")}):
            hit.append(name)
    return hit


def calling_parts(code: str, text: str) -> list[str]:
    """The definitions (or MODULE) of `code` holding a call of a name `text` mentions
    (`make_pipeline` -> the function that builds the pipeline), in file order."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    words = _words(text)
    hit: list[str] = []
    for node in tree.body:
        name = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else MODULE
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            f = call.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if called in words and name not in hit:
                hit.append(name)
    return hit


def tuning_plan(spec: TopicSpec, idea: FilteredIdea) -> ExperimentPlan:
    """The plan of a tuning move, written without the LLM: the move is the whole change."""
    m, p = idea.tuning, idea.tuning.paired
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.experiment],
                          location=m.where + (f"; {p.where}" if p else ""), evaluation=spec.metric.name,
                          functions=list(dict.fromkeys([m.function] + ([p.function] if p else []))),
                          expected_effect=f"{spec.metric.name} moves with {m.name} ({m.kind}): the seeds' verdict "
                          "says whether the move helps")


def carry_plan(spec: TopicSpec, code: str, idea: FilteredIdea) -> ExperimentPlan:
    """The plan of an earlier win carried over by a merge, written without the LLM: the merge is the change."""
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.title], location="the merged lines",
                          evaluation=spec.metric.name, functions=plan_functions(code, idea.carry.diff),
                          expected_effect=f"{spec.metric.name} improves again, as it did for {idea.carry.win_id}: "
                          "the seeds' verdict says whether it still does on this reference")


def card_plan(spec: TopicSpec, code: str, idea: FilteredIdea) -> ExperimentPlan | None:
    """The plan of an idea that applies a method card, written without the LLM: the card says what
    the method changes (the patch prompt carries it) and the idea where (`code_place`), so the plan
    is the idea's experiment at the parts its place names. None when the place names no part of the
    file (the LLM plans it then): a definition, a method, top-level code, or a call the file makes
    (the part holding it)."""
    if idea.method_card is None or not (idea.code_place or "").strip():
        return None
    functions = plan_functions(code, idea.code_place) or calling_parts(code, idea.code_place)
    if not functions:
        return None
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.experiment], location=idea.code_place,
                          evaluation=spec.metric.name, functions=functions,
                          expected_effect=f"{spec.metric.name} improves by the method of {idea.method_card}: "
                          "the seeds' verdict says whether it does")


def make_plan(spec: TopicSpec, code: str, idea: FilteredIdea, llm: LLM) -> ExperimentPlan:
    if idea.tuning is not None:
        return tuning_plan(spec, idea)
    if idea.carry is not None:
        return carry_plan(spec, code, idea)
    if (planned := card_plan(spec, code, idea)) is not None:
        return planned
    res = llm.complete(plan_prompts.plan(code, spec.metric.name, idea.name, idea.title, idea.experiment, idea.summary,
                                         definitions=describe_definitions(code), data=topic_data(spec)),
                       stage="experiment_plans", schema=PlanDraft, max_tokens=400, item=idea.idea_id)
    if not res.ok:  # a plan is a refinement: fall back to the idea's own experiment text
        return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=[idea.experiment], location="",
                              evaluation=spec.metric.name, expected_effect="", error=res.error,
                              functions=plan_functions(code, idea.experiment))
    p: PlanDraft = res.value
    changes = p.changes or [idea.experiment]
    return ExperimentPlan(idea_id=idea.idea_id, name=idea.name, changes=changes, location=p.location,
                          evaluation=p.evaluation, expected_effect=p.expected_effect,
                          functions=plan_functions(code, p.location, *changes))


def kept_ideas(df: pl.DataFrame) -> list[FilteredIdea]:
    return [i for i in from_frame(df, FilteredIdea) if i.kept]
