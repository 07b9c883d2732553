"""SASL settings reach every Kafka client statefed builds: each client's librdkafka
configuration is checked without connecting (no broker here speaks SASL reliably), and
secrets stay out of every configuration's repr."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.config import GatewayConfig
from gateway.membership import MembershipReader
from gateway.producer import EventProducer
from gateway.routing import RoutingFeed
from gateway.status import PipelineStatusReader, StatusBoard
from node.config import NodeConfig
from node.endprobe import EndProbe
from node.materializer import Materializer
from node.membership import MembershipPublisher
from node.partitions import PartitionRegistry
from node.standby import StandbyReplicator
from pipeline.config import PipelineConfig
from pipeline.job import source_options
from pipeline.sink import batch_producer_config
from pipeline.source import SourceOptions
from pipeline.statuslog import status_producer_config
from pipeline.watermarks import consumer_config
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
    "STATEFED_KAFKA_SASL_PASSWORD": "hunter2",
}
SASL = {
    "bootstrap.servers": "kafka.example:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "statefed",
    "sasl.password": "hunter2",
}


def _node_clients() -> dict[str, Mapping[str, Any]]:
    config = NodeConfig.from_env(ENV)
    registry = PartitionRegistry(config.node_id)
    materializer = Materializer(config, CATALOGUE, registry)
    return {
        "materializer": materializer.consumer_config(),
        "standby": StandbyReplicator(config, CATALOGUE, registry).consumer_config(),
        "end probe": EndProbe(config).consumer_config(),
        "membership publisher": MembershipPublisher(config, registry).producer_config(),
        "node admin": admin_config(config.kafka),
    }


def _gateway_clients() -> dict[str, Mapping[str, Any]]:
    kafka = GatewayConfig.from_env(ENV).kafka
    reader = MembershipReader(kafka, RoutingFeed(), lookback_ms=1000)
    status = PipelineStatusReader(kafka, StatusBoard(), tail_records=10)
    return {
        "membership reader": reader.consumer_config(),
        "status reader": status.consumer_config(),
        "produce mutation": EventProducer(kafka, 5.0).producer_config(),
    }


def _pipeline_clients() -> dict[str, Mapping[str, Any]]:
    config = PipelineConfig.from_env(ENV)
    source = SourceOptions.from_options(source_options(config, "words"))
    return {
        "changelog sink": batch_producer_config(config.kafka, "q", 30.0),
        "status log": status_producer_config(config.kafka, 30.0),
        "watermarks": consumer_config(config.kafka, "words"),
        "source reader": consumer_config(source.kafka, "words"),
        "pipeline admin": admin_config(config.kafka),
    }


def _tooling_clients() -> dict[str, Mapping[str, Any]]:
    kafka = ToolingConfig.from_env(ENV).kafka
    return {"cli producer": producer_config(kafka), "cli admin": admin_config(kafka)}


CLIENTS = {
    **_node_clients(),
    **_gateway_clients(),
    **_pipeline_clients(),
    **_tooling_clients(),
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_sasl_settings_reach_every_client(client: str) -> None:
    config = CLIENTS[client]
    assert {k: config.get(k) for k in SASL} == SASL


def test_the_fixed_settings_stay_where_correctness_needs_them() -> None:
    assert CLIENTS["materializer"]["group.id"] == "statefed-nodes"
    assert CLIENTS["materializer"]["partition.assignment.strategy"] == "cooperative-sticky"
    for producer in ("cli producer", "produce mutation", "changelog sink"):
        assert CLIENTS[producer]["partitioner"] == "murmur2_random"
    for consumer in ("standby", "end probe", "membership reader", "status reader", "watermarks"):
        assert CLIENTS[consumer]["enable.auto.commit"] is False


def test_the_official_connector_gets_the_settings_as_kafka_options() -> None:
    config = PipelineConfig.from_env({**ENV, "STATEFED_SOURCE_FORMAT": "kafka"})
    options = source_options(config, "words")
    assert options["subscribe"] == "words"
    assert options["kafka.bootstrap.servers"] == "kafka.example:9093"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in options["kafka.sasl.jaas.config"]
    assert 'password="hunter2"' in options["kafka.sasl.jaas.config"]


def test_no_configuration_shows_the_password() -> None:
    for config in (
        NodeConfig.from_env(ENV),
        GatewayConfig.from_env(ENV),
        PipelineConfig.from_env(ENV),
        ToolingConfig.from_env(ENV),
    ):
        shown = repr(config)
        assert "hunter2" not in shown and "SASL_SSL" in shown
    options = SourceOptions.from_options(source_options(PipelineConfig.from_env(ENV), "w"))
    assert "hunter2" not in repr(options)


def test_a_bad_setting_is_an_error_of_the_part() -> None:
    from node.errors import ConfigError as NodeConfigError
    from pipeline.errors import PipelineConfigError

    with pytest.raises(NodeConfigError, match="STATEFED_KAFKA_SASL_JAAS_CONFIG"):
        NodeConfig.from_env({"STATEFED_KAFKA_SASL_JAAS_CONFIG": "x"})
    with pytest.raises(PipelineConfigError, match=r"sets group\.id"):
        SourceOptions.from_options({"bootstrap": "b:1", "topic": "t", "kafka.group.id": "g"})


def test_health_cluster_and_logs_do_not_show_the_password(caplog: pytest.LogCaptureFixture) -> None:
    config = GatewayConfig.from_env(ENV)
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
