"""The GraphQL requests the benchmark sends, built from the view catalogue entry."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from schema import WORD_COUNTS, View

__all__ = ["GraphQLClient", "many_body", "point_body", "top_body"]


def _body(query: str, variables: dict[str, Any]) -> bytes:
    return orjson.dumps({"query": query, "variables": variables})


def point_body(key: str, view: View = WORD_COUNTS) -> bytes:
    k = view.key_field
    query = f"query($k: String!) {{ {view.point_field}({k}: $k) {{ {k} count }} }}"
    return _body(query.replace("$k", f"${k}"), {k: key})


def many_body(keys: list[str], view: View = WORD_COUNTS) -> bytes:
    k, ks = view.key_field, view.keys_arg
    query = f"query(${ks}: [String!]!) {{ {view.many_field}({ks}: ${ks}) {{ {k} count }} }}"
    return _body(query, {ks: keys})


def top_body(limit: int, view: View = WORD_COUNTS) -> bytes:
    query = (
        f"query($limit: Int!) {{ {view.top_field}(limit: $limit) {{ {view.key_field} count }} }}"
    )
    return _body(query, {"limit": limit})


class GraphQLClient:
    """A blocking client for checks and polling (not for load: that is loadgen's job)."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.http = httpx.Client(timeout=timeout_s)

    def post(self, url: str, body: bytes) -> dict[str, Any]:
        response = self.http.post(url, content=body, headers={"content-type": "application/json"})
        document: dict[str, Any] = response.json()
        return document

    def counts(self, url: str, keys: list[str], view: View = WORD_COUNTS) -> dict[str, int | None]:
        """Counts of `keys` via the multi-key field; raises RuntimeError on GraphQL errors."""
        document = self.post(url, many_body(keys, view))
        if document.get("errors") or not document.get("data"):
            raise RuntimeError(f"lookup of {len(keys)} keys failed: {document.get('errors')}")
        rows = document["data"][view.many_field]
        return {key: (row["count"] if row else None) for key, row in zip(keys, rows, strict=True)}

    def close(self) -> None:
        self.http.close()
