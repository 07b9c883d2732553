"""Persisted queries at the gateway: Apollo's automatic persisted queries (APQ) and a
trusted-documents mode, both settling a request's document before it is parsed
(`GatewayEndpoint.resolve`, over HTTP, SSE and WebSockets alike).

APQ (STATEFED_GATEWAY_APQ, on by default): a request may name its document by
`extensions.persistedQuery: {version: 1, sha256Hash}` instead of sending it, by POST or by
GET (the extensions as URL-encoded JSON). A hash the gateway knows runs its text; an
unknown one is answered `PERSISTED_QUERY_NOT_FOUND` (message `PersistedQueryNotFound`, HTTP
200 and `cache-control: private, no-cache, must-revalidate`, as Apollo Server answers), and
the client sends the text with the hash, which is checked (sha256 of the text, else 400
`PERSISTED_QUERY_HASH_MISMATCH`) and remembered in a store bounded by bytes
(STATEFED_GATEWAY_APQ_MB, least recently used evicted). With APQ off such a request gets
`PERSISTED_QUERY_NOT_SUPPORTED` (200), which makes Apollo's link send texts from then on.

Trusted documents (STATEFED_GATEWAY_TRUSTED_DOCUMENTS=<manifest>): only the manifest's
operations run, named by id (the hash) or sent as text equal to a manifest body; an
unknown id is 404 `PERSISTED_QUERY_NOT_FOUND`, any other text 403
`PERSISTED_QUERY_NOT_IN_LIST` (the codes of Apollo Router's safelisting). Nothing is
registered in this mode. The manifest is read at start-up; until then every request is
refused.

Errors are `RequestError`s: the shared GraphQL-over-HTTP layer answers them like its own.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from runtime.config import ConfigError
from runtime.graphql_http import GraphQLRequest, RequestError
from runtime.graphql_http.request import NO_DOCUMENT

__all__ = [
    "APQ_FORMAT",
    "DocumentStore",
    "PersistedQueries",
    "TrustedDocuments",
    "sha256_hex",
]

APQ_FORMAT = "apollo-persisted-query-manifest"
_MANIFEST = "STATEFED_GATEWAY_TRUSTED_DOCUMENTS"
_ENTRY_OVERHEAD = 200  # bytes of one stored text besides its characters: dict, node, hash
# a client may retry at once: no cache on the way may keep the refusal
_UNCACHED = ((b"cache-control", b"private, no-cache, must-revalidate"),)
_OUTCOMES = ("hit", "miss", "registered", "refused")


def sha256_hex(text: str) -> str:
    """The id APQ gives a document: the SHA-256 of its UTF-8 text, in lowercase hex."""
    return hashlib.sha256(text.encode()).hexdigest()


class DocumentStore:
    """Query texts by hash, at most `max_bytes` (estimated: characters plus a fixed
    overhead per entry), the least recently used evicted first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._texts: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._texts)

    def get(self, digest: str) -> str | None:
        text = self._texts.get(digest)
        if text is not None:
            self._texts.move_to_end(digest)
        return text

    def put(self, digest: str, text: str) -> None:
        """Keep `text` under `digest`; one larger than the whole store is not kept."""
        size = _size(digest, text)
        if size > self.max_bytes or digest in self._texts:
            return
        self._texts[digest] = text
        self.bytes += size
        while self.bytes > self.max_bytes:
            old, evicted = self._texts.popitem(last=False)
            self.bytes -= _size(old, evicted)


def _size(digest: str, text: str) -> int:
    return len(digest) + len(text) + _ENTRY_OVERHEAD


class TrustedDocuments:
    """The operations of a manifest: `by_id` maps each id to its body."""

    def __init__(self, by_id: Mapping[str, str], source: str) -> None:
        self.by_id = dict(by_id)
        self.bodies = frozenset(self.by_id.values())
        self.source = source

    @classmethod
    def load(cls, path: Path) -> TrustedDocuments:
        """The manifest at `path`; ConfigError naming STATEFED_GATEWAY_TRUSTED_DOCUMENTS
        when it cannot be read or is in neither format."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(_MANIFEST, f"cannot read {str(path)!r}: {exc}") from exc
        return cls.parse(raw, str(path))

    @classmethod
    def parse(cls, raw: bytes, source: str) -> TrustedDocuments:
        """An Apollo persisted-query manifest (`{"format": "apollo-persisted-query-manifest",
        "version": 1, "operations": [{"id", "body", ...}]}`) or a `{id: body}` map (GraphQL
        Codegen's client preset, Relay)."""
        try:
            manifest = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(_MANIFEST, f"{source} is not JSON: {exc}") from exc
        if not isinstance(manifest, dict):
            raise _bad(source, "the manifest must be a JSON object")
        if "format" in manifest:
            by_id = _apollo_operations(manifest, source)
        else:
            by_id = _map_operations(manifest, source)
        if not by_id:
            raise _bad(source, "the manifest holds no operations: every request would be refused")
        return cls(by_id, source)


def _apollo_operations(manifest: dict[str, Any], source: str) -> dict[str, str]:
    if manifest["format"] != APQ_FORMAT or manifest.get("version") != 1:
        raise _bad(
            source,
            f"format {manifest['format']!r} version {manifest.get('version')!r} is not "
            f"{APQ_FORMAT!r} version 1",
        )
    operations = manifest.get("operations")
    if not isinstance(operations, list):
        raise _bad(source, "`operations` must be a list")
    by_id: dict[str, str] = {}
    for index, operation in enumerate(operations):
        if not isinstance(operation, dict):
            raise _bad(source, f"operations[{index}] must be an object")
        ident, body = operation.get("id"), operation.get("body")
        if not (isinstance(ident, str) and isinstance(body, str) and _usable(ident, body)):
            raise _bad(source, f"operations[{index}] needs a string `id` and `body`")
        by_id[ident] = body
    return by_id


def _map_operations(manifest: dict[str, Any], source: str) -> dict[str, str]:
    for ident, body in manifest.items():
        if not (isinstance(body, str) and _usable(ident, body)):
            raise _bad(
                source,
                f"entry {ident!r} must map an id to a document's text (a {{id: body}} map), "
                f"or give `format`: {APQ_FORMAT!r}",
            )
    return dict(manifest)


def _usable(ident: str, body: str) -> bool:
    return bool(ident.strip()) and bool(body.strip())


def _bad(source: str, problem: str) -> ConfigError:
    return ConfigError(_MANIFEST, f"{source}: {problem}")


class PersistedQueries:
    """The gateway's persisted queries: APQ in a store of `apq_bytes` (None: APQ off), or,
    given a `manifest` path, trusted documents only (read by `start`)."""

    def __init__(self, apq_bytes: int | None, manifest: Path | None = None) -> None:
        self.manifest = manifest
        self.store = None if apq_bytes is None or manifest is not None else DocumentStore(apq_bytes)
        # until the manifest is read nothing is trusted: fail closed
        self.trusted = None if manifest is None else TrustedDocuments({}, str(manifest))
        self.counts = dict.fromkeys(_OUTCOMES, 0)

    def start(self) -> None:
        """Read the manifest (trusted-documents mode); ConfigError when it is unusable."""
        if self.manifest is not None:
            self.trusted = TrustedDocuments.load(self.manifest)

    def resolve(self, request: GraphQLRequest) -> None:
        """Give `request` its document, or refuse it with RequestError."""
        extensions = request.extensions
        persisted = None if extensions is None else extensions.get("persistedQuery")
        if persisted is None and not request.query:
            raise RequestError(NO_DOCUMENT)
        if self.trusted is not None:
            self._trusted(request, persisted, self.trusted)
        elif persisted is not None:
            self._automatic(request, persisted)

    def _automatic(self, request: GraphQLRequest, persisted: Any) -> None:
        store = self.store
        if store is None:
            raise RequestError(
                "PersistedQueryNotSupported", 200, "PERSISTED_QUERY_NOT_SUPPORTED", _UNCACHED
            )
        digest = _digest(persisted)
        if not request.query:
            text = store.get(digest)
            if text is None:
                self.counts["miss"] += 1
                raise RequestError(
                    "PersistedQueryNotFound", 200, "PERSISTED_QUERY_NOT_FOUND", _UNCACHED
                )
            self.counts["hit"] += 1
            request.query = text
            return
        if sha256_hex(request.query) != digest:
            raise _mismatch()
        if store.get(digest) is None:
            store.put(digest, request.query)
            self.counts["registered"] += 1

    def _trusted(self, request: GraphQLRequest, persisted: Any, trusted: TrustedDocuments) -> None:
        digest = None if persisted is None else _digest(persisted)
        if digest is not None and not request.query:
            text = trusted.by_id.get(digest)
            if text is None:
                self.counts["miss"] += 1
                raise RequestError(
                    f"no operation with id {digest!r} in the trusted documents ({_MANIFEST})",
                    404,
                    "PERSISTED_QUERY_NOT_FOUND",
                    _UNCACHED,
                )
            self.counts["hit"] += 1
            request.query = text
            return
        if request.query not in trusted.bodies:
            self.counts["refused"] += 1
            raise RequestError(
                f"this gateway runs only its trusted documents ({_MANIFEST}) and this "
                "document is not one of them: add it to the "
                "manifest, or send the id of one that is in extensions.persistedQuery.sha256Hash",
                403,
                "PERSISTED_QUERY_NOT_IN_LIST",
                _UNCACHED,
            )
        named = None if digest is None else trusted.by_id.get(digest)
        if digest is not None and named != request.query and sha256_hex(request.query) != digest:
            raise _mismatch()

    def figures(self) -> list[Metric]:
        """Scrape-time metrics: requests by outcome, and what the APQ store holds."""
        outcomes = CounterMetricFamily(
            "statefed_gateway_persisted_queries",
            "Requests naming or registering a persisted query, by outcome (hit, miss, "
            "registered, refused: a text not among the trusted documents)",
            labels=["outcome"],
        )
        for outcome, count in self.counts.items():
            outcomes.add_metric([outcome], count)
        figures: list[Metric] = [outcomes]
        if self.store is not None:
            figures.append(
                GaugeMetricFamily(
                    "statefed_gateway_apq_entries",
                    "Query texts the APQ store holds",
                    len(self.store),
                )
            )
            figures.append(
                GaugeMetricFamily(
                    "statefed_gateway_apq_bytes",
                    "Estimated bytes the APQ store holds",
                    self.store.bytes,
                )
            )
        return figures


def _digest(persisted: Any) -> str:
    """The hash `extensions.persistedQuery` names, checked."""
    if not isinstance(persisted, dict):
        raise RequestError("`extensions.persistedQuery` must be an object {version, sha256Hash}")
    if persisted.get("version") != 1:
        raise RequestError("Unsupported persisted query version (this gateway speaks version 1)")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not digest:
        raise RequestError(
            "`extensions.persistedQuery.sha256Hash` must be a string: the SHA-256 of the "
            "query's text in hex"
        )
    return digest


def _mismatch() -> RequestError:
    return RequestError(
        "provided sha does not match query: extensions.persistedQuery.sha256Hash must be "
        "the SHA-256 of the UTF-8 text in `query`, in lowercase hex",
        400,
        "PERSISTED_QUERY_HASH_MISMATCH",
    )
