"""GraphQL over HTTP, shared by the node and the gateway: content negotiation, request
checks, documents parsed (with a token limit) and validated once, the query limits decided
before validation, status codes per the GraphQL over HTTP spec,
and the uvicorn protocol that keeps long GET requests answered in JSON."""

from runtime.graphql_http.asgi import Receive, Scope, Send, send_body, send_json, send_page
from runtime.graphql_http.documents import DocumentCache, Prepared
from runtime.graphql_http.endpoint import Answer, GraphQLHTTP
from runtime.graphql_http.limits import (
    Limits,
    Measure,
    QueryLimitError,
    Size,
    measure,
    parse_limited,
    weigh,
)
from runtime.graphql_http.media import MediaType, is_json_request, negotiate
from runtime.graphql_http.protocol import GraphQLHttpToolsProtocol
from runtime.graphql_http.request import (
    MAX_REQUEST_TARGET_BYTES,
    GraphQLRequest,
    RequestError,
)
from runtime.graphql_http.response import (
    BAD_USER_INPUT,
    INTERNAL_SERVER_ERROR,
    ErrorMapper,
    Outcome,
    error_extensions,
)

__all__ = [
    "BAD_USER_INPUT",
    "INTERNAL_SERVER_ERROR",
    "MAX_REQUEST_TARGET_BYTES",
    "Answer",
    "DocumentCache",
    "ErrorMapper",
    "GraphQLHTTP",
    "GraphQLHttpToolsProtocol",
    "GraphQLRequest",
    "Limits",
    "Measure",
    "MediaType",
    "Outcome",
    "Prepared",
    "QueryLimitError",
    "Receive",
    "RequestError",
    "Scope",
    "Send",
    "Size",
    "error_extensions",
    "is_json_request",
    "measure",
    "negotiate",
    "parse_limited",
    "send_body",
    "send_json",
    "send_page",
    "weigh",
]
