"""CSRF prevention, in one place: no request a browser sends without asking the server first
runs anything but a query.

A page of any origin can make its visitor's browser send a "simple" request (a GET, or a
POST whose content-type is text/plain, application/x-www-form-urlencoded, multipart/form-data
or absent, with no custom header) with no CORS preflight and with the visitor's cookies;
CORS only stops that page from *reading* the answer. Anything else (a JSON POST, an
`authorization` header) is preflighted, and the CORS allowlist decides. So, as Apollo
Server's CSRF prevention, what a simple request asks for must change nothing:

- POST is JSON only (`application/json`): any other content type, or none, is refused
  (415) before the body is read, so a form or a `no-cors` fetch never gets a mutation run;
- GET and HEAD run queries only: a mutation is refused (405) before it runs. A GET query
  changes nothing and its answer stays unreadable to pages CORS does not allow (unlike
  Apollo Server, a GET needs no extra header: reads by link or by cache-friendly GET stay
  simple; what a cross-site page can still learn is whether and how fast it answered);
- every other method is refused (405), a preflight (answered by the gateway's CORS layer)
  aside.

A GET's content-type means nothing (it has no body) and is ignored.
"""

from __future__ import annotations

from graphql import OperationType

from runtime.graphql_http.media import is_json_request
from runtime.graphql_http.request import RequestError

__all__ = ["SIMPLE_CONTENT_TYPES", "check_operation", "check_request"]

# what a browser sends cross-origin without a preflight (the Fetch standard's
# CORS-safelisted content types)
SIMPLE_CONTENT_TYPES = (
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
)
_ALLOW_ANY = ((b"allow", b"GET, POST"),)
_ALLOW_POST = ((b"allow", b"POST"),)


def check_request(method: str, content_type: bytes | None) -> None:
    """Refuse, before its body is read, a request that could come from a cross-site form."""
    if method == "POST":
        if not is_json_request(content_type):
            raise _unsupported(content_type)
    elif method not in ("GET", "HEAD"):
        raise RequestError("GraphQL takes GET or POST", 405, "METHOD_NOT_ALLOWED", _ALLOW_ANY)


def check_operation(method: str, operation: OperationType) -> None:
    """Refuse, before it runs, an operation other than a query sent by GET."""
    if operation is not OperationType.QUERY and method != "POST":
        raise RequestError(
            f"{operation.value}s are only accepted by POST with a JSON body",
            405,
            "METHOD_NOT_ALLOWED",
            _ALLOW_POST,
        )


def _unsupported(content_type: bytes | None) -> RequestError:
    given = "no content-type"
    if content_type is not None:
        given = f"content-type {content_type.decode('latin-1')!r}"
    return RequestError(
        f"a GraphQL POST must be JSON (content-type application/json), not {given}: "
        "other bodies are what a cross-site form can send",
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
