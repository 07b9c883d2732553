"""The node's uvicorn settings (node.serve.server)."""

from __future__ import annotations

from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.server import uvicorn_config


def test_nothing_between_uvicorn_and_the_node_rewrites_requests_from_proxy_headers() -> None:
    """uvicorn's proxy-headers middleware, on by default for loopback peers, is not put in
    front of the node: it reads no scheme, and the peer address it logs for a refused call
    must not come from a header the caller wrote."""
    app = NodeApp(NodeConfig())
    config = uvicorn_config(app)
    config.load()
    assert config.loaded_app is app
