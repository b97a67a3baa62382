"""A broken experiment, its fix, and a scripted LLM that records every prompt: the debugging loop's fakes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

from assets.run_results.experimenting import RunTarget
from resources.paths import REPO_ROOT
from resources.runner import Runner

# the bug (a misspelt name) sits two calls below the module level where the script starts
BROKEN = textwrap.dedent("""\
    import json


    def scale(values, factor):
        return sum(values) * factr


    def total(values):
        return scale(values, 2)


    if __name__ == "__main__":
        result = total([1, 2, 3])
        print("total", result)
        with open("result.json", "w") as f:
            json.dump({"total": result}, f)
    """)


FIX = "```python\ndef scale(values, factor):\n    return sum(values) * factor\n```"


ANALYSIS = "scale() multiplies by factr, which is not defined; its parameter is called factor."


class FakeLLM:
    """Stands in for resources.llm.LLM: answers by stage, applies `parse` like the real one."""

    def __init__(self, fix: str | list[str] = FIX, analysis: str = ANALYSIS, local: bool = False,
                 edit_format: str = "whole"):
        self.answers = {"debug_analysis": analysis, "debug": fix}   # a list: one answer per call, the last repeats
        self.requests: list[tuple[str, list[dict]]] = []
        self.sampling: list[tuple[float | None, int | None]] = []   # (temperature, seed) asked per call
        self.items: list[str | None] = []  # the idea each call was accounted to
        self.local, self.edit_format = local, edit_format

    def is_local(self) -> bool:
        return self.local

    def complete(self, messages, *, stage, parse=None, schema=None, max_tokens=512, max_retries=None, item=None,
                 temperature=None, seed=None):
        from resources.llm import error_kind_of

        self.requests.append((stage, messages))
        self.items.append(item)
        self.sampling.append((temperature, seed))
        text = self.answers[stage]
        if isinstance(text, list):
            text = text[min(sum(s == stage for s, _ in self.requests) - 1, len(text) - 1)]
        try:
            value = parse(text) if parse else text
        except ValueError as e:  # the kind travels as a value, as in resources.llm.LLM
            return SimpleNamespace(ok=False, value=None, text=text, error=f"invalid answer (try 1): {e}",
                                   error_kind=error_kind_of(e))
        return SimpleNamespace(ok=True, value=value, text=text, error=None, error_kind=None)

    def stages(self) -> list[str]:
        return [s for s, _ in self.requests]

    def prompt(self, stage: str = "debug") -> str:
        return next(m[-1]["content"] for s, m in self.requests if s == stage)


def target(script: Path, **kw) -> RunTarget:
    return RunTarget(folder=script.parent, code_file=script.name, command=("python", script.name), timeout_s=60, **kw)


def _debug(*args, env):
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "debug", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _env(tmp_path, server=None, **extra):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "RESEARCHLOOP_MODEL": "fake-model",
           "OPENAI_API_KEY": "sk-test", **extra}
    env.pop("RESEARCHLOOP_EDIT_FORMAT", None)
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    else:
        env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # nothing listens: any LLM call would fail
    return env


SAME_ERROR = "```python\ndef scale(values, factor):\n    return sum(list(values)) * factr\n```"


class CountingRunner:
    """The real sandbox runner, counting its runs."""

    def __init__(self):
        self.inner, self.runs = Runner(), 0

    def run(self, *a, **kw):
        self.runs += 1
        return self.inner.run(*a, **kw)
