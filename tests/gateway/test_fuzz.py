"""schemathesis in GraphQL mode against the gateway under a real uvicorn on loopback, over
fake nodes: valid and invalid queries of every root field, built from the schema the
gateway introspects. No answer may be a 5xx, and every error must be a GraphQL error with
an `extensions.code` that is not a server fault. Run anonymous, and with bearer JWTs on
(every view scoped, a valid token with those scopes on every request)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import orjson
import pytest
import requests
import schemathesis
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from graphql import NameNode, ObjectFieldNode, get_introspection_query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jwt.algorithms import RSAAlgorithm
from schemathesis import GenerationMode
from schemathesis.core.result import Err
from schemathesis.graphql import nodes

from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from schema import EventRow, View, ViewKind
from tests.gateway.fakes import (
    BOOKING_HISTORY,
    FULL,
    HOSTS,
    LAST_BOOKING,
    PER_MINUTE,
    WORDS,
    Model,
    client_for,
    fake_nodes,
    feed_for,
)
from tooling.broker import free_port
from tooling.processes import wait_until

P = 4
MINUTE = 60_000
BASE = 28_333_333 * MINUTE  # an aligned window start in November 2023
KEYS = ["a", "b", "kafka", "0", ""]
EXAMPLES = 60  # per root field, valid and invalid queries: 23-72 s a run on 2 cores (2026-12)
JWT_EXAMPLES = 40  # the same again with authentication on: only the admission differs
READ_SCOPE = "statefed:read"


def model() -> Model:
    truth = Model(
        counts={
            WORDS.name: {"kafka": 5, "franz": 3, "a": 1},
            HOSTS.name: {"a": 2, "b": 7},
        },
        windows={PER_MINUTE.name: {("a", BASE): 3, ("b", BASE): 1, ("a", BASE + MINUTE): 4}},
    )
    for offset, key in enumerate(["a", "a", "b", "0"]):
        event = EventRow(key, BASE + offset * 1000, 0, offset, {"trip": f"t{offset}"})
        truth.add_event(LAST_BOOKING, event)
        truth.add_event(BOOKING_HISTORY, event)
    return truth


def _iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).isoformat()


# Windows the model holds, other aligned starts, and schemathesis's own arbitrary DateTimes
# (any year, unaligned): registered for the run of this module's test only.
_DATETIMES = st.one_of(
    st.sampled_from([BASE, BASE + MINUTE]).map(_iso),
    st.integers(-(2**40), 2**44).map(lambda n: _iso(n - n % MINUTE)),
    st.tuples(st.dates(), st.times()).map(lambda dt: f"{dt[0]}T{dt[1]}Z"),
).map(nodes.String)


def _object(fields: dict[str, str]) -> Any:
    return nodes.Object(
        [ObjectFieldNode(name=NameNode(value=k), value=nodes.String(v)) for k, v in fields.items()]
    )


# Federation representations: of the entity types (count and latest views), of no type,
# without their key.
_ENTITIES = [
    (v.type_name, v.key_field) for v in FULL if v.kind in (ViewKind.COUNT, ViewKind.LATEST)
]
_REPRESENTATIONS = st.builds(
    lambda entity, key, keyed: _object(
        {"__typename": entity[0], **({entity[1]: key} if keyed else {})}
    ),
    st.sampled_from([*_ENTITIES, ("Nope", "id")]),
    st.one_of(st.sampled_from(KEYS), st.text(max_size=20)),
    st.booleans(),
)


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` under uvicorn (lifespan on) on a free loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, loop="asyncio", log_level="warning", lifespan="on"
        )
    )
    thread = threading.Thread(target=server.run, name="fuzzed-gateway", daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError(f"uvicorn on port {port} stopped before it started")
        return server.started

    try:
        wait_until(started, 15, f"uvicorn on port {port} to start", 0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
    assert not thread.is_alive(), "the gateway's uvicorn did not stop"


def problems(response: requests.Response) -> list[str]:
    """What is wrong with one answer: a 5xx, a body that is no GraphQL response, an error
    without a code, or a code that means the gateway failed."""
    if response.status_code >= 500:
        return [f"HTTP {response.status_code}: {response.text[:300]}"]
    try:
        body = response.json()
    except ValueError:
        return [f"HTTP {response.status_code} with a body that is no JSON: {response.text[:300]}"]
    if not isinstance(body, dict) or not ("data" in body or body.get("errors")):
        return [f"no GraphQL response: {body!r:.300}"]
    found = []
    for error in body.get("errors") or []:
        code = (error.get("extensions") or {}).get("code")
        if not isinstance(error.get("message"), str) or not isinstance(code, str):
            found.append(f"an error without message or code: {error}")
        elif code == "INTERNAL_SERVER_ERROR":
            found.append(f"a server fault: {error}")
    if response.status_code != 200 and "data" in body:
        found.append(f"HTTP {response.status_code} with data: {body!r:.300}")
    return found


def fuzz(operation: Any, session: requests.Session, seen: Counter[str], examples: int) -> None:
    """Valid and invalid queries of one root field; each answer checked by `problems`."""
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same queries on every run: a failure is reproducible
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        # a bound for a gateway that never answers, not a speed goal: on a loaded machine
        # (the suite beside a cluster tier) an answer once took over 10 s
        response = case.call(session=session, timeout=60)
        found = problems(response)
        assert not found, found  # hypothesis shows the (shrunk) query that got this answer
        errors = response.json().get("errors") or []
        codes = sorted({str((e.get("extensions") or {}).get("code")) for e in errors})
        mode = case.meta.generation.mode.value if case.meta else "unknown"
        seen[f"{mode} {operation.label} {'/'.join(codes) or 'ok'}"] += 1

    run()


def with_jwt(tmp_path: Path) -> tuple[GatewayConfig, dict[str, str]]:
    """A gateway verifying RS256 tokens with a JWKS file, and a valid token's header."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(private.public_key(), as_dict=True), "kid": "k1"}
    path = tmp_path / "jwks.json"
    path.write_bytes(orjson.dumps({"keys": [jwk]}))
    config = GatewayConfig(
        timeout_ms=2000,
        auth="jwt",
        jwks=str(path),
        jwt_issuer="https://issuer.test/",
        jwt_audience="statefed",
    )
    now = int(time.time())
    claims = {
        "iss": config.jwt_issuer,
        "aud": config.jwt_audience,
        "sub": "fuzzer",
        "exp": now + 3600,
        "scope": f"{READ_SCOPE} statefed:produce",
    }
    token = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
    return config, {"authorization": f"Bearer {token}"}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("auth", ["anonymous", "jwt"])
def test_schemathesis_finds_no_server_error(auth: str, tmp_path: Path) -> None:
    fakes = fake_nodes(model(), P, 2, FULL)
    upstream = client_for(fakes)
    config, examples = GatewayConfig(timeout_ms=2000), EXAMPLES
    headers: dict[str, str] = {}
    catalogue: tuple[View, ...] = FULL
    if auth == "jwt":
        (config, headers), examples = with_jwt(tmp_path), JWT_EXAMPLES
        catalogue = tuple(dataclasses.replace(view, scope=READ_SCOPE) for view in FULL)
    app = GatewayApp(
        config,
        feed=feed_for(fakes, P, FULL),
        client=upstream,
        statuses=StatusBoard(),
        catalogue=catalogue,
    )
    seen: Counter[str] = Counter()
    # registered for the whole process; no other test uses schemathesis
    schemathesis.graphql.scalar("DateTime", _DATETIMES)
    schemathesis.graphql.scalar("_Any", _REPRESENTATIONS)
    try:
        with served(app) as base, requests.Session() as session:
            session.trust_env = False  # loopback only, never through a proxy of the environment
            session.headers.update(headers)  # every request, the introspection's too
            url = f"{base}/graphql"
            introspection = {"query": get_introspection_query()}
            schema = schemathesis.graphql.from_dict(
                session.post(url, json=introspection, timeout=10).json()
            )
            schema.location = url
            # federation's _entities and _service are left out unless included by name
            included = schema.include(name_regex=r"^Query\.")
            operations = []
            for result in included.get_all_operations():
                if isinstance(result, Err):
                    raise result.err()  # the gateway's schema is one schemathesis cannot read
                operations.append(result.ok())
            for operation in operations:
                fuzz(operation, session, seen, examples)
    finally:
        asyncio.run(upstream.aclose())
    assert {label.split()[1] for label in seen} == {op.label for op in operations}
    assert not [label for label in seen if "UNAUTHENTICATED" in label]  # the token held
    # a valid query reached the resolvers when its answer is data, or a resolver's refusal of
    # its arguments (a scan's generated paging nearly always mixes forwards and backwards,
    # a point lookup's DateTime is rarely a window start): any code but the validator's
    refused_before = {"GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED"}
    answered = {
        label.split()[1]
        for label in seen
        if label.startswith("positive") and not refused_before & set(label.split()[2].split("/"))
    }
    # the valid queries of every root field got past validation to its resolver
    assert answered == {op.label for op in operations}, sorted(seen.items())
