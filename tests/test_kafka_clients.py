"""SASL settings reach every Kafka client statefed builds: each client's librdkafka
configuration is checked without connecting (no broker here speaks SASL reliably), the
password read from a file as a deployment's secret would be, and secrets stay out of every
configuration's repr."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster.membership import MembershipReader
from gateway.cluster.pipeline import PipelineStatusReader, StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.writes.producer import EventProducer
from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.reads.endprobe import EndProbe
from node.replication.membership import MembershipPublisher
from node.replication.standby import StandbyReplicator
from pipeline.config import PipelineConfig
from pipeline.job import source_options
from pipeline.sink import batch_producer_config
from pipeline.statuslog import status_producer_config
from runtime.kafka import CLIENT_LOG
from runtime.produce import producer_config
from runtime.topics import admin_config
from schema import CATALOGUE
from tests.gateway.fakes import WORDS, Model, fake_nodes, running_gateway
from tooling.config import ToolingConfig

ENV = {
    "STATEFED_BOOTSTRAP": "kafka.example:9093",
    "STATEFED_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "STATEFED_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "STATEFED_KAFKA_SASL_USERNAME": "statefed",
}
SASL = {
    "bootstrap.servers": "kafka.example:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "statefed",
    "sasl.password": "hunter2",
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """ENV with the password in a secret file, as a container would mount it."""
    secret = Path(tmp_path_factory.mktemp("secrets")) / "kafka-password"
    secret.write_text("hunter2\n", encoding="utf-8")
    yield {**ENV, "STATEFED_KAFKA_SASL_PASSWORD_FILE": str(secret)}


def _node_clients(env: Mapping[str, str]) -> dict[str, Mapping[str, Any]]:
    config = NodeConfig.from_env(env)
    registry = PartitionRegistry(config.node_id)
    materializer = Materializer(config, CATALOGUE, registry)
    return {
        "materializer": materializer.consumer_config(),
        "standby": StandbyReplicator(config, CATALOGUE, registry).consumer_config(),
        "end probe": EndProbe(config).consumer_config(),
        "membership publisher": MembershipPublisher(config, registry).producer_config(),
        "node admin": admin_config(config.kafka),
    }


def _gateway_clients(env: Mapping[str, str]) -> dict[str, Mapping[str, Any]]:
    kafka = GatewayConfig.from_env(env).kafka
    reader = MembershipReader(kafka, RoutingFeed(), lookback_ms=1000)
    status = PipelineStatusReader(kafka, StatusBoard(), tail_records=10)
    return {
        "membership reader": reader.consumer_config(),
        "status reader": status.consumer_config(),
        "produce mutation": EventProducer(kafka, 5.0).producer_config(),
        "gateway admin": admin_config(kafka),
    }


def _pipeline_clients(env: Mapping[str, str]) -> dict[str, Mapping[str, Any]]:
    config = PipelineConfig.from_env(env)
    return {
        "changelog sink": batch_producer_config(config.kafka, "q", 30.0),
        "status log": status_producer_config(config.kafka, 30.0),
        "pipeline admin": admin_config(config.kafka),
    }


def _tooling_clients(env: Mapping[str, str]) -> dict[str, Mapping[str, Any]]:
    kafka = ToolingConfig.from_env(env).kafka
    return {"cli producer": producer_config(kafka), "cli admin": admin_config(kafka)}


@pytest.fixture(scope="module")
def clients(env: dict[str, str]) -> dict[str, Mapping[str, Any]]:
    """Every Kafka client's librdkafka configuration, by what the client is."""
    return {
        **_node_clients(env),
        **_gateway_clients(env),
        **_pipeline_clients(env),
        **_tooling_clients(env),
    }


def test_sasl_settings_reach_every_client(clients: dict[str, Mapping[str, Any]]) -> None:
    wrong = {
        name: {k: config.get(k) for k in SASL}
        for name, config in clients.items()
        if {k: config.get(k) for k in SASL} != SASL
    }
    assert not wrong, wrong


def test_every_client_logs_through_the_parts_logging(
    clients: dict[str, Mapping[str, Any]],
) -> None:
    # librdkafka's own lines would reach stderr past the log format (not JSON in JSON mode)
    wrong = {name for name, config in clients.items() if config.get("logger") is not CLIENT_LOG}
    assert not wrong, wrong


def test_the_fixed_settings_stay_where_correctness_needs_them(
    clients: dict[str, Mapping[str, Any]],
) -> None:
    assert clients["materializer"]["group.id"] == "statefed-nodes"
    assert clients["materializer"]["partition.assignment.strategy"] == "cooperative-sticky"
    for producer in ("cli producer", "produce mutation", "changelog sink"):
        assert clients[producer]["partitioner"] == "murmur2_random"
    for consumer in ("standby", "end probe", "membership reader", "status reader"):
        assert clients[consumer]["enable.auto.commit"] is False


def test_the_official_connector_gets_the_settings_as_kafka_options(env: dict[str, str]) -> None:
    config = PipelineConfig.from_env(env)
    options = source_options(config, "words")
    assert options["subscribe"] == "words"
    assert options["kafka.bootstrap.servers"] == "kafka.example:9093"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in options["kafka.sasl.jaas.config"]
    assert 'password="hunter2"' in options["kafka.sasl.jaas.config"]


def test_a_micro_batch_source_is_not_held_by_the_brokers_fetch_wait(env: dict[str, str]) -> None:
    # its offset lookups queue behind a fetch the broker holds for the wait: 500 ms by default
    config = PipelineConfig.from_env(env)
    assert source_options(config, "words")["kafka.fetch.max.wait.ms"] == "10"
    assert "kafka.fetch.max.wait.ms" not in source_options(config, "words", realtime=True)


def test_no_configuration_shows_the_password(env: dict[str, str]) -> None:
    for config in (
        NodeConfig.from_env(env),
        GatewayConfig.from_env(env),
        PipelineConfig.from_env(env),
        ToolingConfig.from_env(env),
    ):
        shown = repr(config)
        assert "hunter2" not in shown and "SASL_SSL" in shown


def test_a_bad_setting_is_an_error_of_the_part() -> None:
    from node.errors import ConfigError as NodeConfigError
    from pipeline.errors import PipelineConfigError

    with pytest.raises(NodeConfigError, match="STATEFED_KAFKA_SASL_JAAS_CONFIG"):
        NodeConfig.from_env({"STATEFED_KAFKA_SASL_JAAS_CONFIG": "x"})
    with pytest.raises(PipelineConfigError, match=r"sets group\.id"):
        PipelineConfig.from_env({"STATEFED_KAFKA_GROUP_ID": "g"})


def test_health_cluster_and_logs_do_not_show_the_password(
    env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    config = GatewayConfig.from_env(env)
    query = {"query": "{ cluster { routingVersion nodes { id url state } } }"}

    async def scenario() -> list[str]:
        fakes = fake_nodes(Model.of_counts({"kafka": 5}), 4, 2, [WORDS])
        async with running_gateway(fakes, 4, config=config, catalogue=[WORDS]) as http:
            health = await http.get("/health")
            cluster = await http.post("/graphql", json=query)
            return [health.text, cluster.text]

    with caplog.at_level(logging.DEBUG):
        health, cluster = asyncio.run(scenario())
    assert '"nodes"' in health and "routingVersion" in cluster
    for shown in (health, cluster, caplog.text):
        assert "hunter2" not in shown


def test_the_membership_reader_retries_a_stuck_connection_after_5_s_unless_told(
    env: dict[str, str],
) -> None:
    """A connection attempt made while the broker was stopped can stay stuck after it is
    back; the routing feed gives up on one after 5 s, not librdkafka's 30 s. An operator's
    setting wins."""
    key = "socket.connection.setup.timeout.ms"
    assert _gateway_clients(env)["membership reader"][key] == 5000
    told = {**env, "STATEFED_KAFKA_SOCKET_CONNECTION_SETUP_TIMEOUT_MS": "20000"}
    assert int(_gateway_clients(told)["membership reader"][key]) == 20000
