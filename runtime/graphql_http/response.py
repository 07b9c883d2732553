"""What GraphQL answered, as a response body and status: errors with `extensions.code`,
`data` only when execution ran, and the status the negotiated media type calls for.

Codes every server shares: GRAPHQL_PARSE_FAILED (also for a document over the token limit),
GRAPHQL_VALIDATION_FAILED, BAD_USER_INPUT (variables that do not coerce),
INTERNAL_SERVER_ERROR, and the query limits' own (`runtime.graphql_http.limits`); a server
maps its own exceptions (`ErrorMapper`) before the others apply.

An INTERNAL_SERVER_ERROR is a fault of the server, not an answer: its text (an exception's,
which may name files, addresses or data) is logged with the traceback under the request's
id, and the client gets only `internal error` with the code and that `requestId`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from graphql import ExecutionResult, GraphQLError

from runtime.graphql_http.limits import QueryLimitError
from runtime.graphql_http.media import MediaType

__all__ = [
    "BAD_USER_INPUT",
    "INTERNAL_MESSAGE",
    "INTERNAL_SERVER_ERROR",
    "PARSE_FAILED",
    "VALIDATION_FAILED",
    "ErrorMapper",
    "Outcome",
    "error_extensions",
    "format_errors",
    "internal_error",
    "status_for",
]

log = logging.getLogger(__name__)

PARSE_FAILED = "GRAPHQL_PARSE_FAILED"
VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
BAD_USER_INPUT = "BAD_USER_INPUT"
INTERNAL_SERVER_ERROR = "INTERNAL_SERVER_ERROR"
INTERNAL_MESSAGE = "internal error"

# a server's own exceptions (an error's `original_error`) -> their extensions; None = not its own
ErrorMapper = Callable[[Exception], dict[str, Any] | None]


def _before_any_field(error: GraphQLError) -> bool:
    """Raised by graphql-core itself outside any field: variable values that do not coerce."""
    original = error.original_error
    return error.path is None and (original is None or isinstance(original, GraphQLError))


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~1 us a request
class Outcome:
    """The result of running (or refusing to run) one operation. `executed` is False when
    nothing ran: the response then has no `data`."""

    data: Any
    errors: Sequence[GraphQLError] | None
    executed: bool = True

    @classmethod
    def of(cls, result: ExecutionResult) -> Outcome:
        """graphql-core's result; variables that did not coerce mean nothing was executed."""
        errors = result.errors
        if result.data is None and errors and all(_before_any_field(e) for e in errors):
            return cls(None, errors, executed=False)
        return cls(result.data, errors)

    @classmethod
    def refused(cls, errors: Sequence[GraphQLError]) -> Outcome:
        """A server refused the operation before running it (a limit, a wait that expired)."""
        return cls(None, errors, executed=False)


def error_extensions(
    error: GraphQLError, mapper: ErrorMapper, code: str | None = None
) -> dict[str, Any]:
    """The `extensions` of `error`: a query limit's, the server's own for its exceptions, else
    `code` when the stage decides it (parse, validation), else BAD_USER_INPUT or
    INTERNAL_SERVER_ERROR."""
    original = error.original_error
    if isinstance(original, QueryLimitError):
        return original.extensions()
    if original is not None:
        own = mapper(original)
        if own is not None:
            return own
    if code is not None:
        return {"code": code}
    return {"code": BAD_USER_INPUT if _before_any_field(error) else INTERNAL_SERVER_ERROR}


def format_errors(
    errors: Sequence[GraphQLError],
    mapper: ErrorMapper,
    code: str | None = None,
    request_id: str = "",
) -> list[dict[str, Any]]:
    """The JSON of `errors`, each with `extensions.code`; internal ones masked and logged
    under `request_id`."""
    formatted: list[dict[str, Any]] = []
    for error in errors:
        extensions = error_extensions(error, mapper, code)
        entry = cast(dict[str, Any], error.formatted)  # a fresh dict per call
        if extensions["code"] == INTERNAL_SERVER_ERROR:
            _log_fault(error, request_id)
            entry.update(internal_error(request_id))  # path and locations stay: the client's
        else:
            entry["extensions"] = {**(error.extensions or {}), **extensions}
        formatted.append(entry)
    return formatted


def _log_fault(error: GraphQLError, request_id: str) -> None:
    where = f" at {'.'.join(map(str, error.path))}" if error.path else ""
    log.error(
        "internal error, request %s%s: %s",
        request_id,
        where,
        error.message,
        exc_info=error.original_error,
    )


def internal_error(request_id: str) -> dict[str, Any]:
    """The error a client gets for a fault of the server: no text of it, the id it is
    logged under."""
    return {
        "message": INTERNAL_MESSAGE,
        "extensions": {"code": INTERNAL_SERVER_ERROR, "requestId": request_id},
    }


def status_for(media: MediaType, has_data: bool) -> int:
    """200 for `application/json` (errors are in the body); for graphql-response+json, 400
    when the request failed before execution (no `data`)."""
    return 200 if has_data or media is MediaType.JSON else 400
