"""`python -m bench NAME [ARGS]`: run one benchmark of the registry (bench/__init__.py) with its own
arguments; `python -m bench` lists them; `python -m bench --index` rewrites bench/RESULTS.md (the
headline table and the index) from the records and the pages, measuring nothing."""
from __future__ import annotations

import os
import runpy
import sys
import textwrap
import warnings

from bench import REGISTRY
from bench.results import write_index
from resources.local_llm import assemble_model


def listing() -> str:
    width = max(map(len, REGISTRY)) + 2
    lines = ["python -m bench NAME [ARGS]   (make bench-NAME ARGS=...; a benchmark's own arguments: "
             "python -m bench NAME --help)", ""]
    for b in REGISTRY.values():
        lines.append(f"  {b.name:<{width}}{b.title} ({b.cost})")
        lines += textwrap.wrap(f"measures: {b.measures}", 100, initial_indent=" " * (width + 4),
                               subsequent_indent=" " * (width + 4))
    lines += ["", "Each writes bench/records/ and its page bench/results/NAME.md; bench/RESULTS.md indexes them."]
    return "\n".join(lines)


def fetch_model() -> None:
    """The local model, joined and verified before a benchmark that asks it starts (the server
    would do this on its first request, with no progress shown)."""
    if os.environ.get("OPENAI_BASE_URL"):
        return
    model = os.environ.get("RESEARCHLOOP_LOCAL_MODEL") or "qwen2.5-coder-1.5b"
    print(f"local model {model}: {assemble_model(model, progress=True)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    if argv[0] == "--index":
        print(f"wrote {write_index()}")
        return 0
    name, args = argv[0], argv[1:]
    if name not in REGISTRY:
        print(f"no benchmark {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    b = REGISTRY[name]
    if b.llm and not (b.no_llm_with and b.no_llm_with in args):
        fetch_model()
    argv0, sys.argv = sys.argv, [f"python -m {b.module}", *args]
    # runpy's note when the module was imported before (in a test process) says nothing about the run
    warnings.filterwarnings("ignore", message=f"'{b.module}' found in sys.modules", category=RuntimeWarning)
    try:
        runpy.run_module(b.module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv0
    return 0


if __name__ == "__main__":
    sys.exit(main())
