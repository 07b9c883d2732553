"""Every part talks to Kafka over TLS only: the pipeline (its `statefed_kafka` source, sink
and status log), a node, the gateway and the test's producer reach a Kafka broker whose
only client listener speaks TLS (tests/kafka_tls/tls.py), and the counts come out exact.

The cluster has a package of its own so that it never runs next to the e2e package's
cluster: two Spark sessions at once would crowd a 2-core machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from runtime.kafka import KafkaConnectionError, KafkaSettings
from runtime.topics import admin_config, partition_count
from tests.e2e.conftest import Cluster
from tests.kafka_tls.tls import TlsBroker, client_groups
from tooling.localcluster import LocalCluster
from tooling.processes import ProcessFailed, wait_until

pytestmark = pytest.mark.timeout(300)

# a few dozen records over a handful of words
WORDS = ["kafka"] * 12 + ["tls"] * 7 + ["handshake"] * 4 + [f"word{i}" for i in range(13)]
# the variables of the cluster's Kafka settings, unset for a part that reads the file
_UNSET = {"STATEFED_KAFKA_SECURITY_PROTOCOL": "", "STATEFED_KAFKA_SSL_CA_LOCATION": ""}


@dataclass(frozen=True)
class TlsCluster:
    cluster: Cluster
    tls: TlsBroker


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    """One pipeline, one node, one gateway: the pipeline and the gateway configured with
    STATEFED_KAFKA_* variables, the node with a client properties file."""
    base = Path(tmp_path_factory.mktemp("kafka-tls"))
    tls = TlsBroker(base)
    properties = base / "client.properties"
    properties.write_text(f"security.protocol=SSL\nssl.ca.location={tls.ca}\n", encoding="utf-8")
    env = {**os.environ, "STATEFED_CATALOGUE": "tests.kafka_tls.views:CATALOGUE"}
    env |= tls.client_env()
    with LocalCluster(base, partitions=2, env=env, progress=print, broker=tls) as local:
        local.start_broker()
        local.start_node("t1", env={"STATEFED_KAFKA_CONFIG": str(properties), **_UNSET})
        local.start_gateway()
        local.start_pipeline()
        local.wait_routable()
        cluster = Cluster(local)
        yield TlsCluster(cluster, tls)
        cluster.http.close()


def test_counts_are_exact_with_every_part_on_tls(tls_cluster: TlsCluster) -> None:
    cluster = tls_cluster.cluster
    cluster.produce(WORDS)
    cluster.wait_counts_equal_truth(sorted(set(WORDS)))
    assert cluster.counts(["kafka", "tls", "handshake", "plaintext"]) == {
        "kafka": 12,
        "tls": 7,
        "handshake": 4,
        "plaintext": None,
    }


def test_the_broker_is_reached_only_through_tls(tls_cluster: TlsCluster) -> None:
    cluster, tls = tls_cluster.cluster, tls_cluster.tls
    local = cluster.local
    parts = [local.pipeline, local.gateway, *local.nodes.values()]
    pids = {part.pid: part.name for part in parts if part is not None and part.pid is not None}
    assert sorted(pids.values()) == ["gateway", "node t1", "pipeline"]
    for part in parts:
        assert part is not None
        assert part.env["STATEFED_BOOTSTRAP"] == tls.bootstrap

    # a client that follows the metadata is sent back to the TLS listener
    metadata = AdminClient(admin_config(tls.settings())).list_topics(timeout=10)
    assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {tls.bootstrap}

    # the listener speaks nothing but TLS: a plaintext client gets no metadata
    with pytest.raises(KafkaConnectionError) as caught:
        partition_count(KafkaSettings(tls.bootstrap), "words", timeout_s=3.0)
    assert "STATEFED_KAFKA_SECURITY_PROTOCOL" in str(caught.value)

    # each part holds connections to the TLS listener, none to the controller's
    through_tls: set[int] = set()

    def every_part_seen_on_tls() -> bool:
        controller = client_groups(tls.broker.controller_port) & set(pids)
        assert not controller, f"parts on the controller listener: {controller}"
        through_tls.update(client_groups(tls.port))
        return set(pids) <= through_tls

    wait_until(
        every_part_seen_on_tls,
        30,
        lambda: f"connections to {tls.bootstrap} from {[pids[p] for p in set(pids) - through_tls]}",
    )


def test_a_node_without_the_ca_names_the_setting(tls_cluster: TlsCluster) -> None:
    local = tls_cluster.cluster.local
    with pytest.raises(ProcessFailed) as caught:
        local.start_node("no-ca", env={"STATEFED_KAFKA_SSL_CA_LOCATION": ""})
    local.nodes.pop("no-ca").stop()  # exited; this closes its log
    local.node_urls.pop("no-ca")
    message = str(caught.value)
    assert "the broker's certificate could not be verified" in message
    assert "set ssl.ca.location (STATEFED_KAFKA_SSL_CA_LOCATION" in message
    assert "now unset: the system CAs" in message
