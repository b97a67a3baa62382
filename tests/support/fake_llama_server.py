"""A stand-in for the llama.cpp launcher in tests of resources/local_llm/'s process handling:
started with the launcher's own arguments (`resources.local_llm serve --model M --port P ...
--alias A`), it binds 127.0.0.1:P (exiting with code 3 when the port is taken, as a server that
cannot bind does) and answers /health and /v1/models like llama.cpp's server. No model is loaded."""
from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv: list[str]) -> int:
    args = dict(itertools.pairwise(argv))   # each flag -> the word after it
    port, alias = int(args["--port"]), args.get("--alias", "model")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path == "/health":
                body = {"status": "ok"}
            elif self.path == "/v1/models":
                body = {"object": "list", "data": [{"id": alias, "object": "model"}]}
            else:
                self.send_response(404)
                self.end_headers()
                return
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    try:
        httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as e:
        print(f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {port}: {e}", flush=True)
        return 3
    print(f"fake server listening on {port}", flush=True)
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
