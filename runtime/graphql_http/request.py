"""A GraphQL-over-HTTP request: read from a JSON body or a GET query string and checked
before any GraphQL work, or refused with a `RequestError` carrying its HTTP status."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qs

import orjson

from runtime.ids import random_bits

__all__ = [
    "MAX_REQUEST_TARGET_BYTES",
    "NO_DOCUMENT",
    "GraphQLRequest",
    "RequestError",
    "decode_body",
    "decode_query_string",
    "names_persisted",
    "request_id",
]

# the longest request target (path and query string) uvicorn's HTTP parser, httptools,
# takes (its parse_url's MAX_URL_LENGTH); GET limits are kept within it
MAX_REQUEST_TARGET_BYTES = (1 << 16) - 1
# an incoming `x-request-id` kept as the request's id: short, and nothing a log line or a
# header could be forged with (no spaces, quotes, control characters)
_SAFE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
NO_DOCUMENT = "the request has no GraphQL document (a string in `query`)"


class RequestError(Exception):
    """A request refused before GraphQL runs: it becomes `status` and one error with
    `extensions.code` (BAD_REQUEST unless said otherwise), and never carries `data`."""

    BAD_REQUEST: ClassVar[str] = "BAD_REQUEST"

    def __init__(
        self,
        message: str,
        status: int = 400,
        code: str = BAD_REQUEST,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = headers

    @classmethod
    def payload_too_large(cls, limit: int, hint: str) -> RequestError:
        """413: a body over `limit` bytes (`hint` names the setting that raises it)."""
        return cls(
            f"the request body is larger than {limit} bytes{_set_by(hint)}",
            413,
            "PAYLOAD_TOO_LARGE",
        )

    @classmethod
    def uri_too_long(cls, limit: int, hint: str) -> RequestError:
        """414: a GET query string over `limit` bytes."""
        message = f"the query string is larger than {limit} bytes{_set_by(hint)}"
        return cls(f"{message}; send longer documents by POST", 414, "URI_TOO_LONG")

    def body(self) -> dict[str, Any]:
        return {"errors": [{"message": str(self), "extensions": {"code": self.code}}]}


def names_persisted(extensions: dict[str, Any]) -> bool:
    """True when `extensions` name the document by a persisted-query hash (Apollo's APQ:
    `persistedQuery: {version, sha256Hash}`), so the request may come without `query`."""
    return extensions.get("persistedQuery") is not None


def _set_by(hint: str) -> str:
    return f" ({hint})" if hint else ""


@dataclass(slots=True)  # read-only by convention: a frozen dataclass's __init__ is slower
class GraphQLRequest:
    """The parameters of one request, checked: `query` a non-empty string, `variables` and
    `extensions` objects or None, `operationName` a string or None; `caller` is who the
    server's `admit` found is asking."""

    query: str
    variables: dict[str, Any] | None = None
    operation_name: str | None = None
    extensions: dict[str, Any] | None = None
    method: str = "POST"
    request_id: str = ""  # names the request in logs and in internal errors (`request_id`)
    caller: Any = None  # who is asking, as the server's `admit` found it
    # the literals bound into `variables` (runtime.graphql_http.literals.Bound), which also
    # moves error locations from the plan's text to this one; None: the text was run as sent
    literals: Any = None

    @classmethod
    def checked(
        cls, query: Any, variables: Any, operation_name: Any, extensions: Any, method: str
    ) -> GraphQLRequest:
        if query is None and isinstance(extensions, dict) and names_persisted(extensions):
            query = ""  # named by its hash: the server's `resolve` finds the text, or refuses
        elif not isinstance(query, str) or not query.strip():
            raise RequestError(NO_DOCUMENT)
        if variables is not None and not isinstance(variables, dict):
            raise RequestError("`variables` must be a JSON object or null")
        if operation_name is not None and not isinstance(operation_name, str):
            raise RequestError("`operationName` must be a string or null")
        if extensions is not None and not isinstance(extensions, dict):
            raise RequestError("`extensions` must be a JSON object or null")
        return cls(query, variables, operation_name, extensions, method)


def request_id(incoming: bytes | None) -> str:
    """The id of one request: the caller's `x-request-id` when it is 1-64 characters of
    letters, digits and `._:-` (a proxy's, to follow a request across logs), else a new
    random one of 32 hex digits."""
    if incoming is not None and _SAFE_REQUEST_ID.fullmatch(incoming):
        return incoming.decode("ascii")
    # 32 hex digits as uuid4().hex, at a fraction of its cost (it only has to be unique)
    return f"{random_bits(128):032x}"


def decode_body(body: bytes) -> GraphQLRequest:
    """The request of a POST's JSON body."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"the body is not JSON: {exc}") from exc
    if isinstance(document, list):
        raise RequestError("batched requests are not supported: send one operation")
    if not isinstance(document, dict):
        raise RequestError("the body must be a JSON object with `query`")
    get = document.get
    return GraphQLRequest.checked(
        get("query"), get("variables"), get("operationName"), get("extensions"), "POST"
    )


def decode_query_string(query_string: bytes, method: str) -> GraphQLRequest | None:
    """The request of a GET's query string; None when it has no `query` parameter."""
    params = parse_qs(query_string.decode("latin-1"))
    if "query" not in params and "extensions" not in params:  # a hash-only GET has no query
        return None
    operation = params.get("operationName", [None])[0]
    return GraphQLRequest.checked(
        params["query"][0] if "query" in params else None,
        _json_param(params, "variables"),
        operation,
        _json_param(params, "extensions"),
        method,
    )


def _json_param(params: dict[str, list[str]], name: str) -> Any:
    if name not in params:
        return None
    try:
        return orjson.loads(params[name][0])
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"`{name}` is not JSON: {exc}") from exc
