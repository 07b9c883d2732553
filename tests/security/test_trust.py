"""Trust between the parts (docs/security.md): nodes answer only calls the
gateway signed with the cluster secret, the gateway names its callers to them, and routes
only to nodes whose membership records are signed.

The cluster tests run a real node (uvicorn, LevelDB, Apache Kafka) and a real gateway
(uvicorn with the production settings) given the same secret file.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from confluent_kafka import Message, Producer
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from gateway.cluster.membership import MemberDirectory
from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import NodeInfo
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.server import uvicorn_config
from gateway.nodes.coalesce import Coalescer
from gateway.nodes.links import feed_url
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.kinds import view_queries
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import ConfigError as NodeConfigError
from node.replication.standby import StandbyReplicator
from node.replication.trust import CallGuard
from node.serve.app import NodeApp
from runtime.clock import wall_clock_ms
from runtime.config import ConfigError
from runtime.graphql_http import RequestError
from runtime.topics import ensure_topics, statefed_topics
from runtime.trust import (
    MAX_CALLERS,
    ClusterSecret,
    NodeCallSigner,
    RequestVerifier,
    SignatureError,
    Stamp,
    encode_callers,
)
from schema import (
    MEMBER_SIGNATURE_HEADER,
    MEMBERS_TOPIC,
    WORD_COUNTS,
    CountRow,
    NodeState,
    View,
    encode_member,
)
from schema.feed import FEED_SUBPROTOCOL
from tests.gateway.fakes import FakeNode, Model, ServerThread, member
from tests.node.harness import P, ThreadNode, node_config, produce_counts, unique_count_view
from tooling.broker import KafkaBroker, free_port
from tooling.processes import client_tls, wait_until

pytestmark = pytest.mark.timeout(180)

SECRET_VARIABLE = "STATEFED_CLUSTER_SECRET_FILE"
POINT = "query($w: String!) { wordCount(word: $w) { word count } }"


def write_secret(path: Path) -> Path:
    """A secret file as docs/security.md says to make one."""
    path.write_bytes(base64.b64encode(os.urandom(48)) + b"\n")
    return path


def other_secret() -> ClusterSecret:
    return ClusterSecret(base64.b64encode(os.urandom(48)))


# -- the secret, the node's configuration, the header formats ----------------------------


def test_a_missing_unreadable_or_short_secret_file_is_refused_naming_the_variable(
    tmp_path: Path,
) -> None:
    short = tmp_path / "short.secret"
    short.write_bytes(b"x" * 31 + b"\n")
    unreadable = tmp_path / "a-directory"
    unreadable.mkdir()
    for path in (tmp_path / "missing.secret", unreadable, short):
        with pytest.raises(ConfigError, match=SECRET_VARIABLE):
            ClusterSecret.read(path)
    secret = ClusterSecret.read(write_secret(tmp_path / "ok.secret"))
    assert "hidden" in repr(secret)
    assert (tmp_path / "ok.secret").read_text().strip() not in repr(secret)


def test_the_node_and_the_gateway_refuse_to_start_without_a_readable_secret(
    tmp_path: Path,
) -> None:
    env = {SECRET_VARIABLE: str(tmp_path / "missing.secret"), "STATEFED_BOOTSTRAP": "127.0.0.1:1"}
    node = NodeApp(NodeConfig.from_env({**env, "STATEFED_STATE_DIR": str(tmp_path)}))
    with pytest.raises(ConfigError, match=SECRET_VARIABLE):
        node.start()  # before any broker is asked
    gateway = GatewayApp(GatewayConfig.from_env(env), statuses=StatusBoard())

    async def start() -> None:
        await gateway.startup()

    with pytest.raises(ConfigError, match=SECRET_VARIABLE):
        asyncio.run(start())


def test_a_node_beyond_loopback_needs_the_secret_or_to_be_told_to_run_open(
    tmp_path: Path,
) -> None:
    with pytest.raises(NodeConfigError, match=SECRET_VARIABLE):
        NodeConfig.from_env({"STATEFED_NODE_HOST": "0.0.0.0"})
    with pytest.raises(NodeConfigError, match=SECRET_VARIABLE):
        NodeConfig.from_env({"STATEFED_NODE_HOST": "10.1.2.3"})
    opened = NodeConfig.from_env({"STATEFED_NODE_HOST": "0.0.0.0", "STATEFED_NODE_AUTH": "none"})
    assert not opened.checks_calls
    closed = NodeConfig.from_env(
        {"STATEFED_NODE_HOST": "0.0.0.0", SECRET_VARIABLE: str(tmp_path / "cluster.secret")}
    )
    assert closed.checks_calls
    for loopback in ("127.0.0.1", "::1", "localhost"):
        assert not NodeConfig.from_env({"STATEFED_NODE_HOST": loopback}).checks_calls
    with pytest.raises(NodeConfigError, match="STATEFED_NODE_AUTH"):
        NodeConfig.from_env({"STATEFED_NODE_AUTH": "maybe"})


def test_callers_are_escaped_and_bounded() -> None:
    assert encode_callers([]) == b"gateway"
    assert encode_callers(["auth0|42", "auth0|42", "a,b c%\n"]) == b"auth0|42,a%2Cb%20c%25%0A"
    many = encode_callers([f"user-{i}" for i in range(MAX_CALLERS + 5)] + ["x" * 10_000])
    assert many.endswith(b",+6")
    assert len(encode_callers(["é" * 10_000])) <= 128


def test_a_session_signature_is_admitted_once_and_remembered_only_within_its_window() -> None:
    secret, now = other_secret(), [10_000_000]
    verifier = RequestVerifier(secret, clock=lambda: now[0], max_skew_ms=60_000)

    def stamp(request_id: bytes) -> Stamp:
        signature = secret.sign_request(b"GET", b"/feed", b"g", request_id, b"", now[0])
        return verifier.stamp(signature)

    first = stamp(b"g-1")
    verifier.once(first)
    now[0] += 30_000
    verifier.once(stamp(b"g-2"))
    with pytest.raises(SignatureError, match="used before"):
        verifier.once(first)  # 30 s on: still within its window
    now[0] += 31_000
    verifier.once(stamp(b"g-3"))
    assert len(verifier._used) == 2  # the first, past its window, is forgotten


def test_a_call_without_a_signature_is_refused_before_its_body_is_read() -> None:
    guard = CallGuard("n1", "n1-1", True, 1 << 20)
    guard.arm(RequestVerifier(other_secret()))

    async def receive() -> Any:
        raise AssertionError("the body was read")

    scope = {"method": "POST", "path": "/graphql", "headers": [(b"content-length", b"9999999")]}
    with pytest.raises(RequestError) as refused:
        asyncio.run(guard.admit(scope, receive))
    assert refused.value.status == 401
    assert refused.value.code == "UNAUTHENTICATED"


def test_a_membership_record_counts_only_when_signed_with_the_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = other_secret()
    now = wall_clock_ms()

    def record(node_id: str, beat: int = now) -> bytes:
        return encode_member(member(node_id, f"http://{node_id}.test", [0, 1], beat))

    def signed(node_id: str, value: bytes | None, ms: int, key: ClusterSecret = secret) -> Any:
        return [(MEMBER_SIGNATURE_HEADER, key.sign_member(node_id, value, ms))]

    directory = MemberDirectory(secret)
    assert not directory.apply(b"forged", record("forged"))
    assert not directory.apply(
        b"wrong", record("wrong"), signed("wrong", record("wrong"), now, other_secret())
    )
    # a signature is for one node id and one value
    assert not directory.apply(b"moved", record("moved"), signed("real", record("moved"), now))
    assert directory.apply(b"real", record("real"), signed("real", record("real"), now))
    assert set(directory.records) == {"real"}
    warned = {r.getMessage() for r in caplog.records if r.levelno == logging.WARNING}
    for node_id in ("forged", "wrong", "moved"):
        assert any(f"node '{node_id}'" in message for message in warned), warned
    # a replayed older tombstone or record does not undo a newer record
    assert not directory.apply(b"real", None, signed("real", None, now - 5000))
    old = record("real", now - 5000)
    assert not directory.apply(b"real", old, signed("real", old, now - 5000))
    assert directory.records["real"].heartbeat_ms == now
    assert not directory.apply(b"real", None)  # an unsigned tombstone
    assert directory.apply(b"real", None, signed("real", None, now + 1))
    assert directory.records == {}
    # without a secret (loopback dev mode) records count as before
    assert MemberDirectory().apply(b"forged", record("forged"))


def test_a_nodes_standby_reader_keeps_the_newest_signed_record_of_each_node(
    tmp_path: Path,
) -> None:
    """Standby placement reads membership too: someone who can write to the topic must
    not make it forget a live node by replaying an older signed tombstone or record."""
    secret = other_secret()
    now = wall_clock_ms()
    config = NodeConfig(node_id="n9", state_dir=tmp_path)
    # read at the time of its stamp: the node's clock offset is 0 (runtime.clockoffsets)
    standby = StandbyReplicator(
        config, [], PartitionRegistry("n9"), wall_ms=lambda: now, secret=secret
    )

    def message(node_id: str, beat: int | None, signed_ms: int) -> Message:
        value = (
            None if beat is None else encode_member(member(node_id, "http://n1.test", [0], beat))
        )
        header = (MEMBER_SIGNATURE_HEADER, secret.sign_member(node_id, value, signed_ms))
        return Message(
            topic=MEMBERS_TOPIC, partition=0, offset=0, key=node_id.encode(), value=value,
            headers=[header],
        )  # fmt: skip

    standby._read_members([message("n1", now, now)])
    standby._read_members([message("n1", None, now - 5000)])  # a replayed tombstone
    standby._read_members([message("n1", now - 5000, now - 5000)])  # a replayed record
    assert standby._members["n1"].heartbeat_ms == now
    standby._read_members([message("n1", None, now + 1)])  # the node's own, newer
    assert "n1" not in standby._members


def test_coalesced_lookups_name_every_caller_in_one_signed_call() -> None:
    secret = other_secret()
    verifier = RequestVerifier(secret)
    calls: list[httpx.Request] = []

    def node(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        h = request.headers
        stamp = verifier.stamp(h["statefed-signature"].encode())
        verifier.verify(
            stamp,
            request.method.encode(),
            request.url.raw_path,
            h["statefed-caller"].encode(),
            h["statefed-request-id"].encode(),
            request.content,
        )
        asked = orjson.loads(request.content)["variables"]["r"]
        return httpx.Response(200, json={"data": {"r": [None] * len(asked)}})

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(node)) as client:
            lookups = Coalescer(Upstream(HttpxCaller(client), NodeCallSigner(secret)).post)
            info = NodeInfo("n1", "http://n1.test", NodeState.RUNNING, 0, True, ())
            queries = view_queries(WORD_COUNTS)
            deadline = asyncio.get_running_loop().time() + 5
            await asyncio.gather(
                *(
                    lookups.lookup(info, queries, [0], [k], {}, deadline, who)
                    for k, who in (("a", "alice"), ("b", "bob"), ("c", "alice"))
                )
            )

    asyncio.run(scenario())
    assert len(calls) == 1
    assert calls[0].headers["statefed-caller"] == "alice,bob"
    # a signed call cannot be replayed with other callers
    stamp = verifier.stamp(calls[0].headers["statefed-signature"].encode())
    with pytest.raises(SignatureError):
        verifier.verify(
            stamp,
            b"POST",
            b"/graphql",
            b"mallory",
            calls[0].headers["statefed-request-id"].encode(),
            calls[0].content,
        )


# -- a real node and a real gateway sharing a secret --------------------------------------


@dataclass
class Cluster:
    secret: ClusterSecret
    view: View
    counts: dict[str, int]
    node: ThreadNode
    gateway: GatewayApp
    gateway_url: str
    bootstrap: str

    @property
    def node_url(self) -> str:
        return self.node.config.url


class GatewayThread:
    """A gateway app under uvicorn with the production settings, in a thread."""

    def __init__(self, app: GatewayApp) -> None:
        self.server = uvicorn.Server(uvicorn_config(app))
        self.thread = threading.Thread(target=self.server.run, name="trusting-gateway", daemon=True)

    def __enter__(self) -> GatewayThread:
        self.thread.start()

        def started() -> bool:
            assert self.thread.is_alive(), "the gateway stopped before it started"
            return self.server.started

        wait_until(started, 30, "the gateway to start", 0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "the gateway did not stop"


@pytest.fixture(scope="module")
def cluster(broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("trust")
    secret_file = write_secret(tmp_path / "cluster.secret")
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    counts = {f"{uuid.uuid4().hex[:6]}-{i}": i + 1 for i in range(30)}
    produce_counts(broker.bootstrap, view, [CountRow(k, n, 0) for k, n in counts.items()])
    config = node_config(
        broker.bootstrap,
        tmp_path,
        f"trusted-{uuid.uuid4().hex[:6]}",
        f"g-{view.name}",
        **{SECRET_VARIABLE: str(secret_file)},
    )
    node = ThreadNode(config, [view]).start()
    gateway_config = GatewayConfig(
        bootstrap=broker.bootstrap, port=free_port(), cluster_secret_file=secret_file
    )
    app = GatewayApp(gateway_config, statuses=StatusBoard(), catalogue=(view,))
    try:
        with GatewayThread(app):
            running = Cluster(
                ClusterSecret.read(secret_file),
                view,
                counts,
                node,
                app,
                gateway_config.url,
                broker.bootstrap,
            )
            wait_until(lambda: routed(running), 60, "the gateway to route every partition")
            yield running
    finally:
        node.stop()


def routed(cluster: Cluster) -> bool:
    health = httpx.get(f"{cluster.gateway_url}/health", timeout=5).json()
    return bool(health["routable"] == list(range(P)))


def post(
    url: str, body: bytes, headers: dict[str, str] | None = None, target: str = "/graphql"
) -> httpx.Response:
    sent = {"content-type": "application/json", **(headers or {})}
    return httpx.post(url + target, content=body, headers=sent, timeout=10, verify=client_tls())


def signed_headers(
    secret: ClusterSecret,
    body: bytes,
    *,
    ms: int | None = None,
    caller: bytes = b"tester",
    request_id: bytes = b"t-1",
) -> dict[str, str]:
    at = wall_clock_ms() if ms is None else ms
    signature = secret.sign_request(b"POST", b"/graphql", caller, request_id, body, at)
    return {
        "statefed-caller": caller.decode(),
        "statefed-request-id": request_id.decode(),
        "statefed-signature": signature.decode(),
    }


def point_body(word: str) -> bytes:
    return orjson.dumps({"query": POINT, "variables": {"w": word}})


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("StatefedSignature")
    document = response.json()
    assert "data" not in document
    assert [e["extensions"]["code"] for e in document["errors"]] == ["UNAUTHENTICATED"]


def test_a_direct_call_without_the_credential_is_refused(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="node.replication.trust")
    word = next(iter(cluster.counts))
    assert_refused(post(cluster.node_url, point_body(word)))
    # claiming a caller is no credential; nor is a GET
    assert_refused(post(cluster.node_url, point_body(word), {"statefed-caller": "gateway"}))
    assert_refused(httpx.get(f"{cluster.node_url}/graphql", params={"query": "{ __typename }"}))
    refused = [r.getMessage() for r in caplog.records if r.name == "node.replication.trust"]
    assert any("refused a call to /graphql" in m and "'gateway'" in m for m in refused), refused


def test_a_call_with_a_bad_signature_is_refused(cluster: Cluster) -> None:
    body = point_body(next(iter(cluster.counts)))
    assert_refused(post(cluster.node_url, body, signed_headers(other_secret(), body)))
    # signed for another body, another caller, or malformed
    other = point_body("another")
    assert_refused(post(cluster.node_url, other, signed_headers(cluster.secret, body)))
    headers = signed_headers(cluster.secret, body)
    assert_refused(post(cluster.node_url, body, {**headers, "statefed-caller": "mallory"}))
    garbled = {**headers, "statefed-signature": headers["statefed-signature"][:-1] + "g"}
    assert_refused(post(cluster.node_url, body, garbled))
    assert_refused(post(cluster.node_url, body, {**headers, "statefed-signature": "v1=1"}))


def test_a_call_signed_long_ago_or_ahead_is_refused(cluster: Cluster) -> None:
    body = point_body(next(iter(cluster.counts)))
    for skew in (-120_000, 120_000):
        headers = signed_headers(cluster.secret, body, ms=wall_clock_ms() + skew)
        assert_refused(post(cluster.node_url, body, headers))


def test_a_call_signed_with_the_secret_is_answered(cluster: Cluster) -> None:
    word, count = next(iter(cluster.counts.items()))

    def answered() -> dict[str, Any] | None:
        body = point_body(word)
        response = post(cluster.node_url, body, signed_headers(cluster.secret, body))
        assert response.status_code == 200, response.text
        data = response.json().get("data") or {}
        return data if data.get("wordCount") else None  # the changelog may still be applying

    data = wait_until(answered, 30, "the node to answer a signed call")
    assert data["wordCount"] == {"word": word, "count": count}


def _handshake(uri: str, headers: dict[str, str]) -> None:
    """Open a feed session at `uri` with these handshake headers, then close it."""

    async def opened() -> None:
        subprotocols = [Subprotocol(FEED_SUBPROTOCOL)]
        async with connect(
            uri, subprotocols=subprotocols, additional_headers=headers, proxy=None
        ) as session:
            assert session.subprotocol == FEED_SUBPROTOCOL

    asyncio.run(opened())


def _refused_handshake(uri: str, headers: dict[str, str], why: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        _handshake(uri, headers)
    response = refused.value.response
    assert response.status_code == 401
    assert why in response.body.decode(), response.body


def _signed_for(
    signer: NodeCallSigner, node: NodeConfig, node_id: str, incarnation: str
) -> tuple[str, dict[str, str]]:
    """The URL of `node`'s feed as a handshake made now for node `node_id`'s process
    `incarnation` names it, and that handshake's headers, signed as the gateway signs."""
    uri, target = feed_url(node.url, node_id, incarnation)
    pairs = signer.headers(b"GET", target.encode(), b"", ())
    return uri, {name.decode(): value.decode() for name, value in pairs}


def test_a_signed_feed_handshake_opens_one_session_replayed_it_is_refused(
    cluster: Cluster,
) -> None:
    """A captured handshake replayed within its 60 s would open a feed session of its own."""
    signer, node = NodeCallSigner(cluster.secret), cluster.node.config
    incarnation = cluster.node.health()["incarnation"]
    uri, captured = _signed_for(signer, node, node.node_id, incarnation)
    _handshake(uri, captured)
    _refused_handshake(uri, captured, "used before")
    for _ in range(2):  # the gateway's handshakes, each signed anew, still open
        _handshake(*_signed_for(signer, node, node.node_id, incarnation))


def test_a_handshake_made_for_another_node_or_another_process_of_it_is_refused(
    cluster: Cluster,
) -> None:
    """The signed target names the node and its process (`?node=<id>&boot=<incarnation>`,
    the incarnation random per process and announced in its membership records): a
    handshake captured for another node of the cluster, or for this node before it
    restarted, opens no session here however soon it is replayed."""
    signer, node = NodeCallSigner(cluster.secret), cluster.node.config
    incarnation = cluster.node.health()["incarnation"]
    # the gateway knows the process from the node's membership record
    assert cluster.gateway.feed is not None
    assert cluster.gateway.feed.current.nodes[node.node_id].incarnation == incarnation
    another_node = _signed_for(signer, node, "another-node", incarnation)
    _refused_handshake(*another_node, "not for this node")
    before_a_restart = _signed_for(signer, node, node.node_id, "0123456789abcdef")
    _refused_handshake(*before_a_restart, "another process of node")
    no_process = _signed_for(signer, node, node.node_id, "")
    _refused_handshake(*no_process, "upgrade gateways first")
    # as an older gateway signs it: no node named
    old_style = {k.decode(): v.decode() for k, v in signer.headers(b"GET", b"/feed", b"", ())}
    _refused_handshake(another_node[0].partition("?")[0], old_style, "upgrade gateways first")
    _handshake(*_signed_for(signer, node, node.node_id, incarnation))


def _events(lines: Iterator[str], deadline_s: float) -> Iterator[Any]:
    """The data of each event of an SSE stream; a failure once `deadline_s` passed without
    one (checked at each line: the gateway sends a comment line every 12 s at least)."""
    deadline = time.monotonic() + deadline_s
    for line in lines:
        if line.startswith("data: "):
            yield orjson.loads(line[6:])
            deadline = time.monotonic() + deadline_s
        assert time.monotonic() < deadline, f"no event within {deadline_s} s"


def test_a_subscription_gets_its_change_over_the_feed_the_gateway_signed_for_the_node(
    cluster: Cluster,
) -> None:
    """The gateway's own feed handshake, signed for the node it calls, opens: a change
    written after the subscription started reaches it."""
    word = f"fresh-{uuid.uuid4().hex[:6]}"  # a key of its own: the module's counts stay
    body = {
        "query": "subscription($w: String!) { wordCount(word: $w) { word count } }",
        "variables": {"w": word},
    }
    headers = {"accept": "text/event-stream"}
    url = f"{cluster.gateway_url}/graphql/stream"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.read()
        events = _events(response.iter_lines(), 20)
        none_yet = {"data": {"wordCount": {"word": word, "count": None}}}
        assert next(events) == none_yet  # followed from now: no count yet
        produce_counts(cluster.bootstrap, cluster.view, [CountRow(word, 7, 0)])
        assert next(events) == {"data": {"wordCount": {"word": word, "count": 7}}}


def test_health_stays_readable_and_shows_no_secret(cluster: Cluster) -> None:
    response = httpx.get(f"{cluster.node_url}/health", timeout=5)
    assert response.status_code == 200
    assert response.json()["node_id"] == cluster.node.config.node_id
    secret_text = Path(str(cluster.node.config.cluster_secret_file)).read_text().strip()
    assert secret_text not in response.text
    assert secret_text[:16] not in response.text


def test_the_gateways_signed_calls_are_answered_and_name_the_caller(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="node.replication.trust")
    words = list(cluster.counts)[:5]
    with httpx.Client(base_url=cluster.gateway_url, timeout=10) as http:
        for word in words:
            response = http.post("/graphql", json={"query": POINT, "variables": {"w": word}})
            assert response.status_code == 200, response.text
            document = response.json()
            assert "errors" not in document, document
            assert document["data"]["wordCount"] == {"word": word, "count": cluster.counts[word]}
    accepted = [r.getMessage() for r in caplog.records if r.name == "node.replication.trust"]
    assert any("from caller 'anonymous'" in m for m in accepted), accepted
    assert not any(
        r.levelno >= logging.INFO for r in caplog.records if r.name == "node.replication.trust"
    )


def test_a_forged_membership_record_is_not_routed_to(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # ids that sort first: a node accepted with these claims would own every partition
    forged, wrong = (f"a-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("forged", "wrong"))
    fake = FakeNode(
        forged,
        Model.of_counts({w: 999 for w in cluster.counts}, cluster.view),
        range(P),
        P,
        (cluster.view,),
    )
    with ServerThread(fake) as server:
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for node_id, key in ((forged, None), (wrong, other_secret())):
            value = encode_member(member(node_id, server.url, range(P), wall_clock_ms(), 60_000))
            headers: list[tuple[str, str | bytes | None]] | None = None
            if key is not None:
                headers = [
                    (MEMBER_SIGNATURE_HEADER, key.sign_member(node_id, value, wall_clock_ms()))
                ]
            producer.produce(MEMBERS_TOPIC, key=node_id.encode(), value=value, headers=headers)
        assert producer.flush(10) == 0
        published = wall_clock_ms()
        real = cluster.node.config.node_id

        def read_past_the_forgeries() -> bool:
            # the real node's records after the forged ones were applied, so were they
            nodes = cluster.gateway.feed.current.nodes if cluster.gateway.feed else {}
            return real in nodes and nodes[real].heartbeat_ms > published

        wait_until(read_past_the_forgeries, 30, "the gateway to read past the forged records")
        nodes = cluster.gateway.feed.current.nodes if cluster.gateway.feed else {}
        assert forged not in nodes and wrong not in nodes
        with httpx.Client(base_url=cluster.gateway_url, timeout=10) as http:
            for word, count in cluster.counts.items():
                body = http.post("/graphql", json={"query": POINT, "variables": {"w": word}})
                assert body.json()["data"]["wordCount"] == {"word": word, "count": count}
            health = http.get("/health").json()
    assert fake.requests == 0
    assert {n["id"] for n in health["nodes"]} == {real}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for node_id in (forged, wrong):
        assert any(node_id in m and "not routed to" in m for m in warned), warned
