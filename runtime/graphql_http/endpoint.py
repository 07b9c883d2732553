"""GraphQL over HTTP, written once: the ASGI handler of `/graphql` that node and gateway
subclass (one base for one protocol, as strawberry's `AsyncBaseHTTPView`).

The base reads and checks the request (POST with a JSON body, or GET with a query string),
negotiates the response media type, parses each distinct document once (at most
`max_tokens` tokens), picks the operation and refuses what a cross-site page could make a
browser send (`csrf`), applies the server's query limits (`refuse`), validates the document
(once), then hands the operation to the server, and writes the answer with orjson. Every
answer carries the request's id (`x-request-id`); a fault of the server reaches the client
as `internal error` with that id, the traceback only the log. A server supplies its schema
and five things: who is asking (`admit`, from the headers, before the body is read), its
per-request `context`, how it `run`s an operation (sync or async, its
own checks first), its `error_extensions` for its own exception types, and what it adds to
an executed answer (`finish`, e.g. `extensions.freshness`); one with persisted queries also
settles the document a request names by hash (`resolve`, before parsing).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from graphql import GraphQLError, GraphQLSchema, OperationDefinitionNode

from runtime.graphql_http.asgi import Receive, Scope, Send, read_body, send_json
from runtime.graphql_http.csrf import check_operation, check_request
from runtime.graphql_http.documents import MAX_TOKENS, DocumentCache, Prepared
from runtime.graphql_http.media import MediaType, negotiate
from runtime.graphql_http.request import (
    MAX_REQUEST_TARGET_BYTES,
    NO_DOCUMENT,
    GraphQLRequest,
    RequestError,
    decode_body,
    decode_query_string,
    request_id,
)
from runtime.graphql_http.response import (
    PARSE_FAILED,
    VALIDATION_FAILED,
    Outcome,
    format_errors,
    internal_error,
    status_for,
)
from runtime.tracing import TRACEPARENT_HEADER, Serving, parse_traceparent

__all__ = ["Answer", "GraphQLHTTP"]

log = logging.getLogger(__name__)

C = TypeVar("C")
Answer = tuple[int, dict[str, Any]]  # HTTP status, JSON body

_ACCEPTED = b"application/graphql-response+json, application/json"


class GraphQLHTTP(Generic[C]):
    """The `/graphql` endpoint over `schema`. POST bodies over `max_body_bytes` get 413;
        GET query strings over it, or over what the HTTP parser takes, get 414. `limit_hint`
        names the setting that raises the limit in those errors. Documents of more than
        `max_tokens` tokens fail to parse, with an error naming `tokens_hint`. Documents that differ
    only in literal argument values share one plan unless `normalize_literals` is off."""

    def __init__(
        self,
        schema: GraphQLSchema,
        max_body_bytes: int,
        limit_hint: str = "",
        max_tokens: int = MAX_TOKENS,
        tokens_hint: str = "max_tokens",
        normalize_literals: bool = True,
    ) -> None:
        self.documents = DocumentCache(
            schema, max_tokens=max_tokens, tokens_variable=tokens_hint, normalize=normalize_literals
        )
        self.max_body_bytes = max_body_bytes
        self.max_query_string_bytes = min(max_body_bytes, MAX_REQUEST_TARGET_BYTES)
        self.limit_hint = limit_hint

    # -- what a server supplies --------------------------------------------------------

    async def admit(self, scope: Scope) -> Any:
        """Who is asking, from the request's headers, before its body is read or its
        document parsed (it becomes `request.caller`); RequestError refuses the request
        (e.g. 401). Not asked for a GET without `query`. Nobody in particular by default."""
        return None

    def resolve(self, request: GraphQLRequest) -> None:
        """Settle the document of `request` before it is parsed: one named only by a
        persisted-query hash (`extensions.persistedQuery`, `request.query` empty) gets its
        text here, or RequestError refuses it (the gateway's `gateway.execute.persisted`). A server
        without persisted queries finds no document in such a request."""
        if not request.query:
            raise RequestError(NO_DOCUMENT)

    def context(self, request: GraphQLRequest) -> C:
        """The context of one request's resolvers; RequestError refuses the request."""
        raise NotImplementedError

    def refuse(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: C,
    ) -> Sequence[GraphQLError]:
        """Errors refusing the operation before the document is validated (query limits,
        `runtime.graphql_http.limits`); none by default."""
        return ()

    async def run(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: C,
    ) -> Outcome:
        """Run `operation` of a valid document, or refuse it (`Outcome.refused`)."""
        raise NotImplementedError

    def error_extensions(self, original: Exception) -> dict[str, Any] | None:
        """`extensions` of an error caused by one of the server's own exceptions."""
        return None

    def finish(self, body: dict[str, Any], context: C) -> None:
        """Complete the body of an executed request, e.g. with response `extensions`."""

    async def without_query(self, scope: Scope, send: Send, media: MediaType | None) -> None:
        """Answer a GET without a `query` parameter (the gateway serves GraphiQL)."""
        error = RequestError("the request has no GraphQL document (a `query` parameter)")
        await send_json(send, error.status, error.body(), media or MediaType.JSON)

    # -- the protocol --------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        accept = content_type = length = incoming_id = traceparent = None
        for name, value in scope["headers"]:
            if name == b"accept":
                accept = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"x-request-id":
                incoming_id = value
            elif name == TRACEPARENT_HEADER:
                traceparent = value
        rid = request_id(incoming_id)
        # the request's id and trace in every log line written while serving it
        with Serving(rid, parse_traceparent(traceparent), "request"):
            await self._serve(scope, receive, send, rid, negotiate(accept), content_type, length)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        rid: str,
        media: MediaType | None,
        content_type: bytes | None,
        length: bytes | None,
    ) -> None:
        written = media or MediaType.JSON  # a refusal of the Accept header itself is JSON
        headers = ((b"x-request-id", rid.encode()),)
        try:
            request = await self._request(scope, receive, content_type, length)
            if request is None:
                await self.without_query(scope, send, media)
                return
            if media is None:
                raise _not_acceptable()
            request.request_id = rid
            status, document = await self.answer(request, media)
        except RequestError as exc:
            await send_json(send, exc.status, exc.body(), written, (*exc.headers, *headers))
            return
        except Exception:  # a fault of ours: logged, never shown (runtime.graphql_http.response)
            log.exception("internal error, request %s", rid)
            await send_json(send, 500, {"errors": [internal_error(rid)]}, written, headers)
            return
        await send_json(send, status, document, written, headers)
        if log.isEnabledFor(logging.DEBUG):  # one line a request only when asked for
            log.debug("%s %s answered %d", scope["method"], scope["path"], status)

    async def _request(
        self, scope: Scope, receive: Receive, content_type: bytes | None, length: bytes | None
    ) -> GraphQLRequest | None:
        """The request's parameters; None for a GET without `query`."""
        method = scope["method"]
        check_request(method, content_type)  # before the body is read
        if method == "POST":
            caller = await self.admit(scope)
            body = await read_body(receive, length, self.max_body_bytes, self.limit_hint)
            request = decode_body(body)
        else:
            query_string = scope.get("query_string", b"")
            if len(query_string) > self.max_query_string_bytes:
                raise RequestError.uri_too_long(self.max_query_string_bytes, self.limit_hint)
            found = decode_query_string(query_string, method)
            if found is None:
                return None
            request, caller = found, await self.admit(scope)
        request.caller = caller
        return request

    async def answer(self, request: GraphQLRequest, media: MediaType = MediaType.JSON) -> Answer:
        """The status and body answering `request`; RequestError when it is refused."""
        if not request.request_id:
            request.request_id = request_id(None)
        self.resolve(request)
        prepared = self.documents.prepare_request(request)  # may bind literals as variables
        if prepared.document is None:
            errors = self._format(prepared.errors, request, PARSE_FAILED)
            return status_for(media, False), {"errors": errors}
        operation = prepared.operation(request.operation_name)
        check_operation(request.method, operation.operation)
        context = self.context(request)
        refused = self.refuse(prepared, operation, request, context)
        if refused:
            return status_for(media, False), {"errors": self._format(refused, request)}
        invalid = self.documents.validate(prepared, request)
        if invalid:
            return status_for(media, False), {
                "errors": self._format(invalid, request, VALIDATION_FAILED)
            }
        outcome = await self.run(prepared, operation, request, context)
        body: dict[str, Any] = {}
        if outcome.errors:
            body["errors"] = self._format(outcome.errors, request)
        if outcome.executed:
            body["data"] = outcome.data
            self.finish(body, context)
        return status_for(media, outcome.executed), body

    def _format(
        self, errors: Sequence[GraphQLError], request: GraphQLRequest, code: str | None = None
    ) -> list[dict[str, Any]]:
        if request.literals is not None:  # located in the plan's text: move them to the request's
            errors = request.literals.relocate(errors)
        return format_errors(errors, self.error_extensions, code, request.request_id)


def _not_acceptable() -> RequestError:
    message = "the request accepts neither application/graphql-response+json nor JSON"
    return RequestError(message, 406, "NOT_ACCEPTABLE", ((b"accept", _ACCEPTED),))
