"""HTTPS between client, gateway and node, with a CA the test makes: the real gateway and a
real node app, each under its own uvicorn settings, a client that trusts the CA gets its
answer; a gateway that does not trust it cannot read the node, and a client that does not
trust it fails the handshake."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator

import httpx
import pytest

from gateway.config import GatewayConfig
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.server import uvicorn_config as node_uvicorn_config
from node.storage.changes import ChangeBatch
from runtime.config import ConfigError
from schema import WORD_COUNTS, CountRow, Role
from tests.node.memory_store import MemoryStore
from tests.security.pems import Pems, write_pems
from tests.security.serving import gateway_served, serving
from tooling.broker import free_port

QUERY = '{ wordCount(word: "kafka") { count } }'


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Pems:
    """A CA and a certificate it signed for 127.0.0.1 (gateway and node share it)."""
    return write_pems(tmp_path_factory.mktemp("tls"))


@contextlib.contextmanager
def https_node(pems: Pems) -> Iterator[str]:
    """A real node app holding word_counts (one partition: kafka = 5) under the node's own
    uvicorn settings with TLS (no lifespan: no Kafka); its advertised URL."""
    port = free_port()
    config = NodeConfig.from_env(
        {
            "STATEFED_NODE_ID": "n1",
            "STATEFED_NODE_PORT": str(port),
            "STATEFED_NODE_TLS_CERT": str(pems.cert),
            "STATEFED_NODE_TLS_KEY": str(pems.key),
        }
    )
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({WORD_COUNTS.changelog_topic: 1})
    store = MemoryStore().open()
    change = ChangeBatch(offsets={WORD_COUNTS.changelog_topic: 7})
    change.put_count(WORD_COUNTS.name, CountRow("kafka", 5, 0))
    store.apply(change)
    registry.attach(0, store, Role.ACTIVE, store.offsets())
    app = NodeApp(config, [WORD_COUNTS], registry=registry)
    settings = node_uvicorn_config(app)
    settings.lifespan = "off"
    with serving(settings, "node n1"):
        yield config.url


@contextlib.contextmanager
def https_gateway(pems: Pems, node_url: str, trust: bool) -> Iterator[str]:
    config = GatewayConfig(
        port=free_port(),
        tls_cert=pems.cert,
        tls_key=pems.key,
        node_ca=pems.ca if trust else None,
        retries=0,
    )
    with gateway_served(config, {"n1": (node_url, [0])}, 1, [WORD_COUNTS]) as url:
        yield url


def ask(url: str, verify: ssl.SSLContext) -> httpx.Response:
    with httpx.Client(verify=verify, timeout=30) as client:
        return client.post(f"{url}/graphql", json={"query": QUERY})


def test_a_client_trusting_the_ca_reads_a_node_through_the_gateway_over_https(
    pems: Pems,
) -> None:
    trusted = ssl.create_default_context(cafile=str(pems.ca))
    with https_node(pems) as node_url, https_gateway(pems, node_url, trust=True) as url:
        assert node_url.startswith("https://127.0.0.1:") and url.startswith("https://")
        response = ask(url, trusted)
        assert response.json()["data"] == {"wordCount": {"count": 5}}, response.json()
        # the node itself answers the CA's clients over HTTPS too
        direct = ask(node_url, trusted).json()
        assert direct["data"] == {"wordCount": {"count": 5}}


def test_a_gateway_not_trusting_the_ca_cannot_read_the_node(pems: Pems) -> None:
    trusted = ssl.create_default_context(cafile=str(pems.ca))
    with https_node(pems) as node_url, https_gateway(pems, node_url, trust=False) as url:
        body = ask(url, trusted).json()
    assert body["data"] == {"wordCount": None}, body
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "PARTITION_UNAVAILABLE"
    assert error["extensions"]["node"] == "n1"
    # the client learns that TLS failed; why, and the node's URL, are for the operator's log
    assert "NodeTLSError" in error["message"]
    assert node_url.removeprefix("https://") not in str(body)


def test_a_client_not_trusting_the_ca_fails_the_handshake(pems: Pems) -> None:
    with (
        https_node(pems) as node_url,
        https_gateway(pems, node_url, trust=True) as url,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        ask(url, ssl.create_default_context())


@pytest.mark.parametrize(
    ("fields", "variable"),
    [
        ({"tls_cert": "CERT"}, "STATEFED_GATEWAY_TLS_KEY"),
        ({"tls_key": "CERT"}, "STATEFED_GATEWAY_TLS_CERT"),
        ({"tls_cert": "CERT", "tls_key": "missing"}, "STATEFED_GATEWAY_TLS_KEY"),
        ({"node_ca": "missing"}, "STATEFED_GATEWAY_NODE_CA"),
    ],
)
def test_the_gateway_takes_a_certificate_and_key_that_exist(
    pems: Pems, fields: dict[str, str], variable: str
) -> None:
    values = {k: pems.cert if v == "CERT" else pems.cert.parent / v for k, v in fields.items()}
    with pytest.raises(ConfigError, match=f"^{variable}: "):
        GatewayConfig(**values)  # type: ignore[arg-type]
