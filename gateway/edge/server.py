"""Running the gateway: uvicorn with uvloop and httptools, one worker."""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
from collections.abc import Iterable
from types import FrameType

import uvicorn

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from runtime.graphql_http import GraphQLHttpToolsProtocol
from runtime.logs import configure_logging
from runtime.otel import start_otel
from runtime.tracing import install_spans
from schema import CATALOGUE, View

__all__ = ["run_gateway", "uvicorn_config"]

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # SIGTERM and SIGINT (Ctrl-C) ask for the clean shutdown that follows: then exit 0
        # instead of having uvicorn re-raise the signal once it has shut down (for SIGINT,
        # a KeyboardInterrupt and its traceback)
        stops = (signal.SIGTERM, signal.SIGINT)
        self._captured_signals = [s for s in self._captured_signals if s not in stops]

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:  # start-up failed; uvicorn has said why
            return
        # what start-up allocated lives as long as the process: keep it out of GC passes
        gc.collect()
        gc.freeze()
        scheme = "https" if self.config.is_ssl else "http"
        url = f"{scheme}://{self.config.host}:{self.config.port}/graphql"
        log.info("statefed gateway: ready on %s", url)


def uvicorn_config(app: GatewayApp) -> uvicorn.Config:
    """uvicorn settings of the gateway: uvloop, httptools (answering over-long GET targets
    with a JSON 414), websockets (messages up to the body limit), the app's lifespan, no
    access log, no proxy headers; HTTPS with the configured certificate."""
    config = app.config
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        loop="uvloop",
        http=GraphQLHttpToolsProtocol,
        # GraphQL subscriptions over WebSocket (gateway.edge.ws); the sans-I/O implementation on
        # websockets' current API (its legacy one is deprecated), with write flow control
        ws="websockets-sansio",
        ws_max_size=config.max_body_bytes,  # a subscribe message is bounded as a POST body
        lifespan="on",
        log_level=config.log_level,
        log_config=None,  # uvicorn's lines go through the root logger (runtime.logs)
        access_log=False,
        # no rewriting of the client and scheme from X-Forwarded-* (uvicorn's default for a
        # loopback peer): the gateway trusts no proxy header (docs/security.md, behind a proxy)
        # and reads neither, and the middleware cost every request a pass over its headers
        proxy_headers=False,
        timeout_graceful_shutdown=5,
        ssl_certfile=config.tls_cert,
        ssl_keyfile=config.tls_key,
    )


def run_gateway(config: GatewayConfig, catalogue: Iterable[View] = CATALOGUE) -> None:
    """Serve the gateway over `catalogue` until SIGTERM or SIGINT, then stop the readers and
    clients; returns normally after either."""
    configure_logging("gateway", config.log_format, config.log_level)
    # the ready and stopped lines show at every level (a person or a script waits for them),
    # as log lines so that they are JSON in JSON mode
    log.setLevel(logging.INFO)
    spans = start_otel("gateway", os.environ)
    install_spans(spans)
    server = _Server(uvicorn_config(GatewayApp(config, catalogue=catalogue)))
    try:
        server.run()
    finally:
        if spans is not None:
            spans.shutdown()
    if not server.started:  # uvicorn has logged why
        log.error("statefed gateway: could not start on %s:%d", config.host, config.port)
        raise SystemExit(1)
    log.info("statefed gateway: stopped")
