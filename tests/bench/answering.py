"""A small HTTP server on loopback for the tests of the wrk scripts: it answers each POSTed
GraphQL request with the JSON document `answer(request)` gives, over keep-alive
connections as the servers under test do."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["answering"]

Answer = Callable[[dict[str, Any]], dict[str, Any]]


@contextmanager
def answering(answer: Answer) -> Iterator[str]:
    """The URL (`http://127.0.0.1:<port>/graphql`) of a server answering with `answer`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the servers under test

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            body = json.dumps(answer(request)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/graphql"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
