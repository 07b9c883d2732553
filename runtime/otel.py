"""OpenTelemetry spans, exported over OTLP/HTTP, when the optional `otel` extra is installed
and OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.

Without either nothing changes: trace ids are still carried (`runtime.tracing`). The
exporter reads the standard OTEL_* variables itself (headers, timeout, the batch delay
OTEL_BSP_SCHEDULE_DELAY); the service name is `statefed-<part>` unless OTEL_SERVICE_NAME
says otherwise. Spans: the gateway's `request`, its `plan` (executing the operation), each
`node call`, and the node's `request`, joined into one trace through `traceparent`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.config import EnvConfig, setting
from runtime.tracing import Trace

__all__ = ["OtelConfig", "OtelSpans", "start_otel"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OtelConfig(EnvConfig):
    """The standard variables that switch export on (the SDK reads the rest itself)."""

    endpoint: str | None = setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        None,
        parse=str,
        doc=(
            "OTLP/HTTP endpoint the gateway and the nodes export spans to, with "
            "the `otel` extra installed (see [Metrics and "
            "logs](operations.md#metrics-and-logs))"
        ),
    )
    traces_endpoint: str | None = setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None, parse=str, doc="the same, for traces only"
    )
    service_name: str | None = setting(
        "OTEL_SERVICE_NAME",
        None,
        parse=str,
        doc="the service name of the exported spans",
        shown_default="`statefed-gateway` / `statefed-node`",
    )

    @property
    def exports(self) -> bool:
        return self.endpoint is not None or self.traces_endpoint is not None


class OtelSpans:
    """Spans recorded by an OpenTelemetry tracer provider (`runtime.tracing.Spans`)."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace

        self._provider = provider
        self._tracer = provider.get_tracer("statefed")
        self._trace = trace

    @contextlib.contextmanager
    def open(self, name: str, parent: Trace | None, attributes: dict[str, Any]) -> Iterator[Trace]:
        from opentelemetry.context import Context
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        context = Context()  # a new trace unless a parent is given
        if parent is not None:
            remote = SpanContext(
                int(parent.trace_id, 16),
                int(parent.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED if parent.sampled else 0),
            )
            context = self._trace.set_span_in_context(NonRecordingSpan(remote))
        with self._tracer.start_as_current_span(name, context, attributes=attributes) as span:
            ids = span.get_span_context()
            yield Trace(f"{ids.trace_id:032x}", f"{ids.span_id:016x}", ids.trace_flags.sampled)

    def shutdown(self) -> None:
        """Export the spans still queued, then stop."""
        self._provider.shutdown()


def start_otel(part: str, environ: Mapping[str, str]) -> OtelSpans | None:
    """Spans exported over OTLP/HTTP for `part`, or None when export is not configured or
    the `otel` extra is not installed (said in the log)."""
    config = OtelConfig.from_env(environ)
    if not config.exports:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "install statefed[otel] to export spans"
        )
        return None
    service = config.service_name or f"statefed-{part}"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    log.info("exporting spans over OTLP/HTTP as %s", service)
    return OtelSpans(provider)
