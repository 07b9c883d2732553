"""Authentication and authorization at the gateway, against a real gateway under uvicorn on
127.0.0.1 over fake nodes, called over real HTTP: bearer JWTs refused and admitted, a JWKS
rotated in its file and at a URL, scopes of views, of `produce` and of node URLs, and a
gateway on a non-loopback address that does not start without STATEFED_GATEWAY_AUTH."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hmac
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from gateway.auth.keys import REFETCH_INTERVAL_MS, KeySetError
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.statuspage import status_page
from runtime.clock import wall_clock_ms
from runtime.config import ConfigError
from runtime.hosts import is_loopback
from schema import View
from tests.gateway.fakes import (
    HOSTS,
    WORDS,
    Model,
    ServerThread,
    client_for,
    fake_nodes,
    feed_for,
)
from tests.security.startup import start_gateway

P = 4
ISSUER = "https://issuer.test/"
AUDIENCE = "statefed-gateway"
WORDS_SCOPE = "words:read"
# word_counts needs a scope; host_access any admitted caller
SCOPED_WORDS = dataclasses.replace(WORDS, scope=WORDS_SCOPE)
CATALOGUE: tuple[View, ...] = (SCOPED_WORDS, HOSTS)
BOTH = '{ wordCount(word: "kafka") { count } hostAccess(host: "a") { count } }'
ROOT = Path(__file__).parents[2]


class Clock:
    """The gateway's clock (ms), moved by the test: it times the JWKS re-reads."""

    def __init__(self) -> None:
        self.ms = wall_clock_ms()

    def __call__(self) -> int:
        return self.ms


@dataclasses.dataclass(frozen=True)
class SigningKey:
    kid: str
    private: Any
    algorithm: str

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        codec = RSAAlgorithm if self.algorithm in ("RS256", "PS256") else ECAlgorithm
        return {**codec.to_jwk(public, as_dict=True), "kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def rsa_key(kid: str, algorithm: str = "RS256") -> SigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return SigningKey(kid, private, algorithm)


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")


@pytest.fixture(scope="module")
def keys() -> dict[str, SigningKey]:
    return {
        "rsa": rsa_key("rsa-1"),
        "ec": ec_key("ec-1"),
        "other": rsa_key("rsa-1"),  # same kid, a key the gateway does not know
        "next": rsa_key("rsa-2"),
    }


def claims(**changes: Any) -> dict[str, Any]:
    """Valid claims for the gateway, with `changes` (None removes a claim)."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": now,
        "exp": now + 300,
        "scope": f"{WORDS_SCOPE} other:thing",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def sign(key: SigningKey, algorithm: str | None = None, **changes: Any) -> str:
    return jwt.encode(
        claims(**changes),
        key.private,
        algorithm=algorithm or key.algorithm,
        headers={"kid": key.kid},
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: Mapping[str, Any], payload: Mapping[str, Any], secret: bytes | None) -> str:
    """A JWT put together by hand: `alg: none` (no signature) or HMAC-SHA256 with `secret`."""
    signing_input = f"{_b64(orjson.dumps(dict(header)))}.{_b64(orjson.dumps(dict(payload)))}"
    signature = b"" if secret is None else hmac.digest(secret, signing_input.encode(), "sha256")
    return f"{signing_input}.{_b64(signature)}"


def jwks(*signing: SigningKey) -> bytes:
    return orjson.dumps({"keys": [key.jwk() for key in signing]})


def jwt_config(**changes: Any) -> GatewayConfig:
    settings: dict[str, Any] = {
        "timeout_ms": 2000,
        "auth": "jwt",
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        "produce": False,  # a produce that passes authorization answers PRODUCE_DISABLED
    }
    return GatewayConfig(**{**settings, **changes})


@contextlib.contextmanager
def gateway(config: GatewayConfig, clock: Clock | None = None) -> Iterator[httpx.Client]:
    """The gateway over fake nodes under uvicorn on loopback, and an HTTP client of it."""
    model = Model(counts={WORDS.name: {"kafka": 5, "franz": 3}, HOSTS.name: {"a": 2}})
    fakes = fake_nodes(model, P, 2, CATALOGUE)
    upstream = client_for(fakes)
    app = GatewayApp(
        config,
        feed=feed_for(fakes, P, CATALOGUE),
        client=upstream,
        catalogue=CATALOGUE,
        clock=clock or wall_clock_ms,
    )
    try:
        with (
            ServerThread(app, lifespan="on") as server,
            httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client,
        ):
            yield client
    finally:
        asyncio.run(upstream.aclose())


def ask(client: httpx.Client, query: str, token: str | None = None, **extra: Any) -> httpx.Response:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return client.post("/graphql", json={"query": query, **extra}, headers=headers)


def codes(body: Mapping[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


def assert_refused(response: httpx.Response, description: str | None) -> None:
    """A 401 with a Bearer challenge and one UNAUTHENTICATED error, and no data."""
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    body = response.json()
    assert "data" not in body and codes(body) == ["UNAUTHENTICATED"]
    if description is None:
        assert "error=" not in challenge
    else:
        assert 'error="invalid_token"' in challenge
        assert description in challenge and description in body["errors"][0]["message"]


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, SigningKey]) -> Path:
    path = tmp_path_factory.mktemp("keys") / "jwks.json"
    path.write_bytes(jwks(keys["rsa"], keys["ec"]))
    return path


@pytest.fixture(scope="module")
def client(jwks_file: Path) -> Iterator[httpx.Client]:
    """A gateway verifying tokens with the JWKS file of `keys` rsa and ec."""
    with gateway(jwt_config(jwks=str(jwks_file))) as http:
        yield http


# -- who is admitted ------------------------------------------------------------------------


def test_a_request_without_a_token_is_refused_before_its_document_is_read(
    client: httpx.Client,
) -> None:
    assert_refused(ask(client, BOTH), None)
    # not even read: a body that is no JSON, a document that does not parse
    not_json = client.post(
        "/graphql", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_refused(not_json, None)
    assert_refused(ask(client, "{ wordCount("), None)
    assert_refused(client.get("/graphql", params={"query": "{ __typename }"}), None)
    # another scheme is no bearer token
    basic = client.post("/graphql", json={"query": BOTH}, headers={"authorization": "Basic YTpi"})
    assert_refused(basic, None)


def test_the_refusal_is_in_the_negotiated_media_type(client: httpx.Client) -> None:
    media = "application/graphql-response+json"
    response = client.post("/graphql", json={"query": BOTH}, headers={"accept": media})
    assert_refused(response, None)
    assert response.headers["content-type"].startswith(media)


def test_graphiql_and_its_assets_stay_public(client: httpx.Client) -> None:
    page = client.get("/graphql", headers={"accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    asset = client.get("/static/graphiql.min.css")
    assert asset.status_code == 200


@pytest.mark.parametrize(
    ("case", "description"),
    [
        ("expired", "the token has expired"),
        ("not yet valid", "the token is not valid yet"),
        ("wrong audience", "the token is for another audience"),
        ("wrong issuer", "the token is from another issuer"),
        ("no exp", "the token lacks a required claim"),
        ("no subject", "the token lacks a required claim"),
        ("signed by another key", "the token's signature or claims are invalid"),
        ("unknown kid", "the token's key id is unknown"),
        ("alg none", "the token's algorithm is not accepted"),
        ("alg a list", "the token's algorithm is not accepted"),
        ("HS256 with the RSA public key", "the token's algorithm is not accepted"),
        ("PS256 named, ES256 key", "the token's algorithm is not accepted for its key"),
        ("malformed", "the token is malformed"),
    ],
)
def test_bad_tokens_are_refused(
    client: httpx.Client, keys: dict[str, SigningKey], case: str, description: str
) -> None:
    rsa_, ec_ = keys["rsa"], keys["ec"]
    now = int(time.time())
    tokens = {
        "expired": lambda: sign(rsa_, exp=now - 60, iat=now - 400),
        "not yet valid": lambda: sign(rsa_, nbf=now + 120),
        "wrong audience": lambda: sign(rsa_, aud="another-service"),
        "wrong issuer": lambda: sign(rsa_, iss="https://evil.test/"),
        "no exp": lambda: sign(rsa_, exp=None),
        "no subject": lambda: sign(rsa_, sub=None),
        "signed by another key": lambda: sign(keys["other"]),
        "unknown kid": lambda: sign(keys["next"]),
        "alg none": lambda: forged({"alg": "none", "kid": rsa_.kid}, claims(), None),
        "alg a list": lambda: forged({"alg": ["RS256"], "kid": rsa_.kid}, claims(), None),
        # the classic confusion: the RSA public key (public, in the JWKS) as an HMAC secret
        "HS256 with the RSA public key": lambda: forged(
            {"alg": "HS256", "kid": rsa_.kid, "typ": "JWT"}, claims(), rsa_.public_pem()
        ),
        "PS256 named, ES256 key": lambda: forged(
            {"alg": "PS256", "kid": ec_.kid}, claims(), b"x" * 32
        ),
        "malformed": lambda: "not.a.jwt",
    }
    assert_refused(ask(client, BOTH, tokens[case]()), description)


def test_valid_tokens_are_admitted_with_some_clock_skew(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    now = int(time.time())
    for token in (
        sign(keys["rsa"]),
        sign(keys["ec"]),
        sign(keys["rsa"], algorithm="PS256"),  # an RSA key verifies RS256 and PS256
        sign(keys["rsa"], exp=now - 10, iat=now - 300),  # within the 30 s leeway
        sign(keys["rsa"], nbf=now + 10),
    ):
        response = ask(client, BOTH, token)
        assert response.status_code == 200, response.text
        assert response.json()["data"] == {"wordCount": {"count": 5}, "hostAccess": {"count": 2}}
    get = client.get(
        "/graphql",
        params={"query": BOTH},
        headers={"authorization": f"Bearer {sign(keys['rsa'])}"},
    )
    assert get.status_code == 200 and get.json()["data"]["wordCount"] == {"count": 5}


# -- what the principal may read and do ---------------------------------------------------


def test_a_view_without_the_tokens_scope_is_forbidden_alone(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    body = ask(client, BOTH, sign(keys["rsa"], scope="other:thing")).json()
    assert body["data"] == {"wordCount": None, "hostAccess": {"count": 2}}
    (error,) = body["errors"]
    assert error["path"] == ["wordCount"]
    assert error["extensions"] == {"code": "FORBIDDEN", "scope": WORDS_SCOPE}
    assert "'alice'" in error["message"]
    # scopes also come as a list in `scp`
    listed = ask(client, BOTH, sign(keys["rsa"], scope=None, scp=[WORDS_SCOPE])).json()
    assert listed == {**listed, "data": {"wordCount": {"count": 5}, "hostAccess": {"count": 2}}}
    assert "errors" not in listed


def test_every_field_of_a_scoped_view_checks_the_scope(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    token = sign(keys["rsa"], scope="")
    many = ask(client, '{ wordCounts(words: ["kafka"]) { count } }', token).json()
    assert codes(many) == ["FORBIDDEN"] and many["errors"][0]["path"] == ["wordCounts"]
    # a non-null field cannot be null: GraphQL's null propagation nulls `data`
    top = ask(client, "{ topWords(limit: 2) { word } }", token).json()
    assert codes(top) == ["FORBIDDEN"] and top["data"] is None
    entities = ask(
        client,
        "query($r: [_Any!]!) { _entities(representations: $r) { "
        "... on WordCount { count } ... on HostAccess { count } } }",
        token,
        variables={
            "r": [
                {"__typename": "WordCount", "word": "kafka"},
                {"__typename": "HostAccess", "host": "a"},
            ]
        },
    ).json()
    assert entities["data"] == {"_entities": [None, {"count": 2}]}
    assert codes(entities) == ["FORBIDDEN"] and entities["errors"][0]["path"] == ["_entities", 0]


def test_produce_needs_its_scope(client: httpx.Client, keys: dict[str, SigningKey]) -> None:
    mutation = 'mutation { produce(topic: "words", key: "kafka") { token } }'
    refused = ask(client, mutation, sign(keys["rsa"])).json()
    assert codes(refused) == ["FORBIDDEN"]
    assert refused["errors"][0]["extensions"]["scope"] == "statefed:produce"
    # past authorization, the mutation is switched off on this gateway
    allowed = ask(client, mutation, sign(keys["rsa"], scope="statefed:produce")).json()
    assert codes(allowed) == ["PRODUCE_DISABLED"]


def test_node_urls_need_the_operator_scope(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    query = "{ cluster { nodes { id state url } } }"
    body = ask(client, query, sign(keys["rsa"])).json()
    nodes = body["data"]["cluster"]["nodes"]
    assert [(n["id"], n["state"], n["url"]) for n in nodes] == [
        ("n0", "RUNNING", None),
        ("n1", "RUNNING", None),
    ]
    assert codes(body) == ["FORBIDDEN", "FORBIDDEN"]
    assert [e["path"] for e in body["errors"]] == [
        ["cluster", "nodes", 0, "url"],
        ["cluster", "nodes", 1, "url"],
    ]
    operator = sign(keys["rsa"], scope="statefed:operator")
    urls = [n["url"] for n in ask(client, query, operator).json()["data"]["cluster"]["nodes"]]
    assert urls == ["http://n0.test", "http://n1.test"]


def test_store_errors_need_the_operator_scope(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    """A store error's text may name the node's files: like a node's URL, operators only."""
    query = "{ cluster { partitions { partition storeError } } }"
    body = ask(client, query, sign(keys["rsa"])).json()
    partitions = body["data"]["cluster"]["partitions"]
    assert partitions and all(p["storeError"] is None for p in partitions)
    assert set(codes(body)) == {"FORBIDDEN"} and len(body["errors"]) == len(partitions)
    assert body["errors"][0]["path"] == ["cluster", "partitions", 0, "storeError"]
    operator = sign(keys["rsa"], scope="statefed:operator")
    shown = ask(client, query, operator).json()
    assert "errors" not in shown and len(shown["data"]["cluster"]["partitions"]) == len(partitions)


def test_health_shows_node_urls_to_operators_only(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    def nodes(headers: dict[str, str]) -> list[dict[str, Any]]:
        response = client.get("/health", headers=headers)
        assert response.status_code == 200  # probes send no token
        return list(response.json()["nodes"])

    for headers in ({}, {"authorization": "Bearer nonsense"}, _bearer(sign(keys["rsa"]))):
        shown = nodes(headers)
        assert [(n["id"], n["state"]) for n in shown] == [("n0", "RUNNING"), ("n1", "RUNNING")]
        assert all("url" not in n and "incarnation" not in n for n in shown)
    operator = nodes(_bearer(sign(keys["rsa"], scope="statefed:operator")))
    assert [n["url"] for n in operator] == ["http://n0.test", "http://n1.test"]
    assert all("incarnation" in n for n in operator)  # to compare with a node's /health


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# -- keys that change -----------------------------------------------------------------------


def test_a_jwks_file_is_read_again_when_it_changes(
    tmp_path: Path, keys: dict[str, SigningKey]
) -> None:
    path = tmp_path / "jwks.json"
    path.write_bytes(jwks(keys["rsa"]))
    clock = Clock()
    with gateway(jwt_config(jwks=str(path)), clock) as http:
        assert ask(http, BOTH, sign(keys["rsa"])).status_code == 200
        assert_refused(ask(http, BOTH, sign(keys["next"])), "the token's key id is unknown")
        path.write_bytes(jwks(keys["rsa"], keys["next"]))  # the new key is published
        assert ask(http, BOTH, sign(keys["next"])).status_code == 200
        path.write_bytes(jwks(keys["next"]))  # the old one retired
        clock.ms += 1000  # a known kid's file is checked again after a second
        assert_refused(ask(http, BOTH, sign(keys["rsa"])), "the token's key id is unknown")
        assert ask(http, BOTH, sign(keys["next"])).status_code == 200


class JwksServer:
    """A JWKS at http://127.0.0.1:<port>/jwks.json that counts its fetches."""

    def __init__(self, document: bytes) -> None:
        self.document = document
        self.fetches = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        self.fetches += 1
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.document})


def test_a_jwks_url_is_fetched_again_for_an_unknown_kid_at_a_bounded_rate(
    keys: dict[str, SigningKey],
) -> None:
    source = JwksServer(jwks(keys["rsa"]))
    clock = Clock()
    with ServerThread(source) as server:
        config = jwt_config(jwks=f"{server.url}/jwks.json")
        with gateway(config, clock) as http:
            assert source.fetches == 1  # at start-up
            assert ask(http, BOTH, sign(keys["rsa"])).status_code == 200
            source.document = jwks(keys["rsa"], keys["next"])
            for _ in range(5):  # made-up or new kids: no fetch within the interval
                assert_refused(ask(http, BOTH, sign(keys["next"])), "key id is unknown")
            assert source.fetches == 1
            clock.ms += REFETCH_INTERVAL_MS
            assert ask(http, BOTH, sign(keys["next"])).status_code == 200
            assert source.fetches == 2
            assert ask(http, BOTH, sign(keys["rsa"])).status_code == 200
            assert source.fetches == 2


def test_a_shared_secret_verifies_hs256_only(tmp_path: Path, keys: dict[str, SigningKey]) -> None:
    secret = os.urandom(32).hex().encode()
    path = tmp_path / "secret"
    path.write_bytes(secret + b"\n")
    with gateway(jwt_config(jwt_secret_file=path)) as http:
        token = jwt.encode(claims(), secret, algorithm="HS256")
        assert ask(http, BOTH, token).json()["data"]["wordCount"] == {"count": 5}
        assert_refused(ask(http, BOTH, sign(keys["rsa"])), "algorithm is not accepted")
        wrong = jwt.encode(claims(), os.urandom(32).hex(), algorithm="HS256")
        assert_refused(ask(http, BOTH, wrong), "signature or claims are invalid")


def test_a_short_secret_or_an_unreadable_jwks_stops_start_up(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"too short")
    for config, problem in (
        (jwt_config(jwt_secret_file=short), "HS256 needs at least 32"),
        (jwt_config(jwks=str(tmp_path / "absent.json")), "cannot read"),
    ):
        app = GatewayApp(config, feed=feed_for([], P, CATALOGUE), catalogue=CATALOGUE)
        with pytest.raises(KeySetError, match=problem):
            asyncio.run(app.startup())


# -- anonymous, and where it is allowed ---------------------------------------------------


def test_anonymous_on_loopback_serves_as_before_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.edge.app")
    with gateway(GatewayConfig(timeout_ms=2000, produce=False)) as http:
        body = ask(http, BOTH, "whatever").json()  # a token is not looked at
        # a view the catalogue gives a scope is not readable without it
        assert body["data"] == {"wordCount": None, "hostAccess": {"count": 2}}
        assert codes(body) == ["FORBIDDEN"]
        nodes = ask(http, "{ cluster { nodes { url } } }").json()["data"]["cluster"]["nodes"]
        assert [n["url"] for n in nodes] == ["http://n0.test", "http://n1.test"]
        health = http.get("/health").json()
        assert [n["url"] for n in health["nodes"]] == ["http://n0.test", "http://n1.test"]
        mutation = 'mutation { produce(topic: "words", key: "k") { token } }'
        assert codes(ask(http, mutation).json()) == ["PRODUCE_DISABLED"]
    assert any("authentication is off" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_addresses_run_without_auth(host: str) -> None:
    assert is_loopback(host)
    assert GatewayConfig.from_env({"STATEFED_GATEWAY_HOST": host}).auth is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "gateway.example"])
def test_a_non_loopback_gateway_needs_auth_asked_for(host: str) -> None:
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_env({"STATEFED_GATEWAY_HOST": host})
    message = str(refused.value)
    for variable in (
        "STATEFED_GATEWAY_AUTH",
        "STATEFED_GATEWAY_HOST",
        "STATEFED_GATEWAY_JWKS",
        "STATEFED_GATEWAY_JWT_SECRET_FILE",
    ):
        assert variable in message
    anonymous = {
        "STATEFED_GATEWAY_HOST": host,
        "STATEFED_GATEWAY_AUTH": "anonymous",
        "STATEFED_CLUSTER_SECRET_FILE": "/run/secrets/cluster",  # also needed there
    }
    assert GatewayConfig.from_env(anonymous).auth == "anonymous"


def test_the_gateway_process_refuses_to_start_on_a_public_address_without_auth() -> None:
    done = start_gateway({"STATEFED_GATEWAY_HOST": "0.0.0.0"})
    assert done.returncode == 1
    assert "STATEFED_GATEWAY_AUTH" in done.stderr and "loopback" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"STATEFED_GATEWAY_AUTH": "jwt"}, "STATEFED_GATEWAY_AUTH"),
        (
            {
                "STATEFED_GATEWAY_AUTH": "jwt",
                "STATEFED_GATEWAY_JWKS": "/k.json",
                "STATEFED_GATEWAY_JWT_SECRET_FILE": "/s",
            },
            "STATEFED_GATEWAY_AUTH",
        ),
        (
            {"STATEFED_GATEWAY_AUTH": "jwt", "STATEFED_GATEWAY_JWKS": "/k.json"},
            "STATEFED_GATEWAY_JWT_ISSUER",
        ),
        (
            {
                "STATEFED_GATEWAY_AUTH": "jwt",
                "STATEFED_GATEWAY_JWKS": "/k.json",
                "STATEFED_GATEWAY_JWT_ISSUER": ISSUER,
            },
            "STATEFED_GATEWAY_JWT_AUDIENCE",
        ),
        (
            {
                "STATEFED_GATEWAY_AUTH": "jwt",
                "STATEFED_GATEWAY_JWKS": "http://keys.example/jwks.json",
                "STATEFED_GATEWAY_JWT_ISSUER": ISSUER,
                "STATEFED_GATEWAY_JWT_AUDIENCE": AUDIENCE,
            },
            "STATEFED_GATEWAY_JWKS",
        ),
        ({"STATEFED_GATEWAY_JWKS": "/k.json"}, "STATEFED_GATEWAY_JWKS"),
    ],
)
def test_jwt_settings_that_do_not_fit_name_the_variable(
    environ: dict[str, str], variable: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_env(environ)
    assert refused.value.variable == variable


def test_a_view_scope_is_an_oauth_scope() -> None:
    with pytest.raises(ValueError, match="no OAuth scope"):
        dataclasses.replace(WORDS, scope="two words")


# -- the status page ------------------------------------------------------------------------


def test_the_status_data_needs_the_operator_scope(
    client: httpx.Client, keys: dict[str, SigningKey]
) -> None:
    assert_refused(client.get("/status.json"), None)
    assert_refused(client.get("/status.json", headers=_bearer("nonsense")), "malformed")
    scoped = client.get("/status.json", headers=_bearer(sign(keys["rsa"])))
    assert scoped.status_code == 403, scoped.text
    assert codes(scoped.json()) == ["FORBIDDEN"] and "nodes" not in scoped.json()
    assert "STATEFED_GATEWAY_OPERATOR_SCOPE" in scoped.json()["errors"][0]["message"]
    operator = client.get(
        "/status.json", headers=_bearer(sign(keys["rsa"], scope="statefed:operator"))
    )
    assert operator.status_code == 200, operator.text
    body = operator.json()
    assert [n["id"] for n in body["nodes"]] == ["n0", "n1"]
    assert [p["partition"] for p in body["partitions"]] == list(range(P))


def test_the_status_page_holds_no_data_and_loads_only_its_own_assets(
    client: httpx.Client,
) -> None:
    page = client.get("/status")  # public, as GraphiQL is: what it shows needs the token
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.content == status_page()  # the same for every caller: no cluster data in it
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "<script>" not in page.text
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("status.js", "status.css"):
        assert client.get(f"/static/{asset}").status_code == 200
