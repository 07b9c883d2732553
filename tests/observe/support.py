"""What the observability tests share: scraping `/metrics`, checking it with promtool, and
a tiny OTLP/HTTP receiver that records the spans posted to it."""

from __future__ import annotations

import http.server
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from tooling.processes import poll_client

PROMTOOL = "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"

Samples = list[tuple[str, dict[str, str], float]]


def scrape(base_url: str) -> tuple[str, Samples]:
    """The text of `base_url`/metrics (its content type checked) and its samples."""
    with poll_client(timeout_s=5.0) as http:
        response = http.get(f"{base_url}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain"), response.headers
    samples = [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    ]
    return response.text, samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`."""
    return sum(
        value
        for sample, have, value in samples
        if sample == name and all(have.get(k) == v for k, v in labels.items())
    )


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples named `name`, by their sorted labels."""
    return {tuple(sorted(have.items())): value for sample, have, value in samples if sample == name}


def promtool_check(text: str) -> None:
    """`promtool check metrics` passes on `text` (lint problems included)."""
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, (done.stdout + done.stderr).decode()


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP endpoint on loopback that records every POST to /v1/traces."""

    posts: list[bytes] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    def start(self) -> OtlpReceiver:
        posts, lock = self.posts, threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.path == "/v1/traces":
                    with lock:
                        posts.append(body)
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[dict[str, str]]:
        """Every span received: service, name, trace id, span id, parent span id (hex)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        found = []
        for body in list(self.posts):
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                attributes: Mapping[str, str] = {
                    a.key: a.value.string_value for a in resource.resource.attributes
                }
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        found.append(
                            {
                                "service": attributes.get("service.name", ""),
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                            }
                        )
        return found

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.thread is not None:
            self.thread.join(10)
