"""The settings several parts read, declared once: each part's config class takes its
field from here, so the parts and the generated configuration reference
(`tooling.configdocs`, which refuses one variable documented two ways) cannot drift."""

from __future__ import annotations

from pathlib import Path

from runtime.config import setting
from runtime.logs import LOG_FORMATS, LOG_LEVELS

__all__ = [
    "bootstrap",
    "cluster_secret_file",
    "event_time_max_ahead_ms",
    "jvm_archives",
    "log_format",
    "log_level",
    "metrics_token_file",
    "registry_url",
]


def bootstrap() -> str:
    return setting("STATEFED_BOOTSTRAP", "127.0.0.1:9092", doc="Kafka bootstrap servers")


def log_format() -> str:
    return setting(
        "STATEFED_LOG_FORMAT",
        "text",
        parse=str.lower,
        choices=LOG_FORMATS,
        doc=(
            "`text` lines or `json` (one object a line: see [Metrics and "
            "logs](operations.md#metrics-and-logs))"
        ),
    )


def log_level() -> str:
    return setting(
        "STATEFED_LOG_LEVEL",
        "info",
        parse=str.lower,
        choices=LOG_LEVELS,
        doc=(
            "every part's log level (the gateway's `STATEFED_GATEWAY_LOG_LEVEL` "
            "wins when set); `debug` logs one line per GraphQL request"
        ),
    )


def cluster_secret_file() -> Path | None:
    return setting(
        "STATEFED_CLUSTER_SECRET_FILE",
        None,
        parse=Path,
        doc=(
            "the secret shared by the gateway and every node (>= 32 bytes, "
            "surrounding whitespace ignored): signs node calls and membership "
            "(see [Trust between the parts](security.md#trust-between-the-parts))"
        ),
    )


def metrics_token_file() -> Path | None:
    return setting(
        "STATEFED_METRICS_TOKEN_FILE",
        None,
        parse=Path,
        doc=(
            "file of the bearer token `/metrics` then needs (>= 32 printable "
            "ASCII characters, surrounding whitespace ignored); unset, `/metrics`"
            " is open (see [Scraping `/metrics`](security.md#scraping-metrics))"
        ),
    )


def registry_url() -> str:
    return setting(
        "STATEFED_REGISTRY_URL",
        "http://127.0.0.1:8081/apis/ccompat/v7",
        doc=(
            "the Schema Registry (Confluent's API) that holds the schemas of the "
            "views with a registry `value_format`; the default is what "
            "`statefed registry` serves"
        ),
    )


def jvm_archives() -> Path | None:
    return setting(
        "STATEFED_JVM_ARCHIVES",
        None,
        parse=Path,
        doc=(
            "the directory of the class-data archives of the JVMs statefed starts (the "
            "local broker, the Schema Registry, Spark's driver), which `make "
            "jvm-archives` writes; a JVM whose archive is there maps its classes in "
            "instead of loading them (see [JVM start-up](operations.md#jvm-start-up))"
        ),
        shown_default="the checkout's `.cache/jvm`",
    )


def event_time_max_ahead_ms() -> int:
    """The pipeline's bound, which `statefed produce` checks before it writes."""
    return setting(
        "STATEFED_PIPELINE_MAX_AHEAD_MS",
        3_600_000,
        low=0,
        high=10 * 365 * 86_400_000,
        doc=(
            "how far after its Kafka record's timestamp a view's event time field may be "
            "(1 hour): a record past it is a dead letter, as it would move windowed views' "
            "watermark past every event to come (raise it for a topic whose event times "
            "are meant to lie ahead of their records); `statefed produce` refuses such "
            "a time before it writes"
        ),
    )
