"""The settings the `statefed` command line and the local launchers read themselves.

Each part (pipeline, node, gateway) reads its own configuration; these are the few
variables of the tools around them, read by the same reader (`runtime.config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runtime import shared_settings as shared
from runtime.config import EnvConfig, setting, settings_group
from runtime.kafka import KafkaClientConfig, KafkaProperties

__all__ = ["ToolingConfig"]


@dataclass(frozen=True)
class ToolingConfig(KafkaClientConfig, EnvConfig):
    """Bootstrap, catalogue and topic layout for `broker`, `topics`, `produce` and `demo`;
    the port of `registry`; the registry `fields` reads; the gateway and token `status`
    reads from."""

    bootstrap: str = shared.bootstrap()
    registry_url: str = shared.registry_url()
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    catalogue: str | None = setting(
        "STATEFED_CATALOGUE",
        None,
        parse=str,
        doc=(
            "the views to serve, as `package.module:NAME` naming a sequence of "
            "`schema.View` (every part must get the same one), imported from the "
            "working directory or `PYTHONPATH` (see [Your own "
            "views](views.md#your-own-catalogue))"
        ),
        shown_default="the built-in one",
    )
    max_ahead_ms: int = shared.event_time_max_ahead_ms()  # `statefed produce` checks it
    partitions: int = setting(
        "STATEFED_PARTITIONS", 6, low=1, doc="partitions of each input and changelog topic"
    )
    broker_host: str = setting(
        "STATEFED_BROKER_HOST",
        "127.0.0.1",
        doc=(
            "where `statefed broker` listens: a loopback address (127.0.0.1, ::1, "
            "localhost); others are refused, as the local broker has no authentication"
        ),
    )
    broker_port: int = setting(
        "STATEFED_BROKER_PORT",
        9092,
        low=1,
        high=65535,
        doc="port `statefed broker` and `statefed demo`'s Kafka listen on",
    )
    broker_dir: Path = setting(
        "STATEFED_BROKER_DIR",
        Path(".statefed/broker"),
        doc="`statefed broker`'s data, kept across restarts; its log is `<dir>/kafka.log`",
    )
    registry_port: int = setting(
        "STATEFED_REGISTRY_PORT",
        8081,
        low=1,
        high=65535,
        doc=(
            "port `statefed registry` listens on, on 127.0.0.1; clients use "
            "`http://127.0.0.1:<port>/apis/ccompat/v7` (see [A local Schema "
            "Registry](operations.md#a-local-schema-registry))"
        ),
    )
    registry_dir: Path = setting(
        "STATEFED_REGISTRY_DIR",
        Path(".statefed/registry"),
        doc=(
            "`statefed registry`'s working directory; its log is `<dir>/registry.log` (it "
            "keeps schemas in memory: a restart forgets them)"
        ),
    )
    jvm_options: str | None = setting(
        "STATEFED_JVM_OPTIONS",
        None,
        parse=str,
        doc=(
            "extra options of the JVMs statefed starts itself, the local Kafka broker and "
            "Schema Registry, split as a shell splits words (the test suite sets "
            "`-XX:TieredStopAtLevel=1`: short-lived JVMs on a small machine spend less CPU "
            "without C2's compilations; Spark's driver takes `SPARK_SUBMIT_OPTS` instead)"
        ),
        shown_default="none",
    )
    jvm_archives: Path | None = shared.jvm_archives()
    demo_dir: Path = setting(
        "STATEFED_DEMO_DIR",
        Path(".statefed/demo"),
        doc=(
            "state, checkpoints and logs of `statefed demo`, emptied at its start (one "
            "holding files no demo wrote is refused)"
        ),
    )
    # `statefed topics`: 3 is the production norm (a 1-broker cluster needs 1, and says so)
    topics_replication: int = setting(
        "STATEFED_TOPICS_REPLICATION_FACTOR",
        3,
        low=1,
        doc=(
            "replicas of every topic `statefed topics` creates (at most the "
            "cluster's broker count; see [Topics](operations.md#topics))"
        ),
    )
    topics_min_isr: int | None = setting(
        "STATEFED_TOPICS_MIN_INSYNC_REPLICAS",
        None,
        parse=int,
        low=1,
        doc="`min.insync.replicas` of every topic `statefed topics` creates",
        shown_default="replication factor - 1, at least 1",
    )
    gateway_url: str = setting(
        "STATEFED_GATEWAY_URL",
        "http://127.0.0.1:8100",
        doc=(
            "the gateway `statefed status` reads `/status.json` from (see [Status"
            " page](operations.md#status-page-and-statefed-status))"
        ),
    )
    gateway_token: str | None = setting(
        "STATEFED_GATEWAY_TOKEN",
        None,
        parse=str,
        doc=(
            "bearer token `statefed status` sends (with the operator scope when "
            "the gateway authenticates)"
        ),
    )
