"""Live: GraphQL subscriptions at the gateway, the transports that carry them
(graphql-transport-ws over WebSocket, GraphQL over Server-Sent Events), and the feed hub
that follows the nodes' change feeds for them."""

from gateway.live.operations import Operations
from gateway.live.slots import Slots, TooManySubscriptions
from gateway.live.sse import GraphQLEventStream
from gateway.live.ws import GraphQLWebSocket

__all__ = [
    "GraphQLEventStream",
    "GraphQLWebSocket",
    "Operations",
    "Slots",
    "TooManySubscriptions",
]
