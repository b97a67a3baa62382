"""The prompt pieces every code-editing prompt shares (the implementation prompt of
assets/patched_code/prompts.py and the debugging prompts of assets/run_results/prompts.py): the
same system message keeps the prefix the server caches. It names the language and the libraries
of the task's own code (a scikit-learn task is not a PyTorch one); a repair's system message also
lists the signatures of the library calls the code makes (`api=True`, assets/editing/calls.py
`api_notes`), so the model sees what a callee really takes instead of guessing."""
from __future__ import annotations

import ast
import sys
from collections.abc import Sequence
from pathlib import PurePath

from assets.editing.calls import api_notes

RULES = ("Keep the command-line arguments, the data loading, the evaluation and the writing of "
         "final_info.json working exactly as they are. Keep the training time similar.")


def rules(code: str, entry_points: Sequence[str] = ()) -> str:
    """What an edit must keep, said for the task at hand: a training script keeps `RULES`; a file
    that an evaluator imports keeps the functions it calls (their names and parameters), and the
    parts the code does not have (arguments, final_info.json) are not mentioned."""
    if not entry_points and "final_info" in code:
        return RULES
    keep = []
    if "argparse" in code or "sys.argv" in code:
        keep.append("the command-line arguments")
    if "final_info" in code:
        keep.append("the writing of final_info.json")
    said = f"Keep {', '.join(keep)} working exactly as they are. " if keep else ""
    if entry_points:
        names = ", ".join(f"`{e.split(':', 1)[-1]}`" for e in entry_points)
        said += (f"The task's evaluator calls {names}: keep their names, parameters and what they return "
                 "(its type and meaning); change how they compute it. ")
    return said + "Keep the running time similar."

# file suffix -> (language, fence tag)
LANGUAGES = {".py": ("Python", "python"), ".r": ("R", "r"), ".jl": ("Julia", "julia"), ".sh": ("shell", "bash"),
             ".js": ("JavaScript", "javascript"), ".ts": ("TypeScript", "typescript"), ".c": ("C", "c"),
             ".cpp": ("C++", "cpp"), ".cu": ("CUDA", "cuda"), ".rs": ("Rust", "rust"), ".go": ("Go", "go")}
# how a package is called in prose; other packages go by their import name
LIBRARY_NAMES = {"torch": "PyTorch", "sklearn": "scikit-learn", "numpy": "NumPy", "pandas": "pandas",
                 "tensorflow": "TensorFlow", "keras": "Keras", "jax": "JAX", "flax": "Flax", "scipy": "SciPy",
                 "xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost", "transformers": "Transformers",
                 "matplotlib": "Matplotlib", "statsmodels": "statsmodels", "torchvision": "torchvision"}
MAX_LIBRARIES = 6
API_HEAD = "Signatures of the library calls in this file (read from the installed libraries):"


def libraries(code: str) -> list[str]:
    """The third-party packages the code imports (not the standard library), by their usual
    names, in the order of their first import; [] when the code does not parse as Python."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    tops: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.append(node.module.split(".")[0])
    tops = [t for t in dict.fromkeys(tops) if t not in sys.stdlib_module_names and t != "__future__"]
    return [LIBRARY_NAMES.get(t, t) for t in tops][:MAX_LIBRARIES]


def system_prompt(code: str, filename: str, *, api: bool = False) -> str:
    """The shared system message: who edits (an engineer in the file's language and libraries)
    and the current file; with `api`, the signatures of the library calls it makes (a lookup in
    an isolated interpreter, left out when it fails)."""
    language, fence = LANGUAGES.get(PurePath(filename).suffix.lower(), ("", ""))
    libs = libraries(code) if fence == "python" else []
    where = f" in {language}" if language else ""
    if libs:
        where += " with " + (", ".join(libs[:-1]) + " and " + libs[-1] if len(libs) > 1 else libs[0])
    text = (f"You are an expert engineer who edits experiment code{where}.\n\n"
            f"The current {filename}:\n```{fence}\n{code}\n```")
    notes = api_notes(code) if api and fence == "python" else ""
    return text + (f"\n\n{API_HEAD}\n{notes}" if notes else "")
