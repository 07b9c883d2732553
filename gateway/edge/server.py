"""Running the gateway: uvicorn with uvloop and httptools, in one process or, with
STATEFED_GATEWAY_PROCESSES > 1, in that many worker processes on the port
(`gateway.edge.supervisor`)."""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

import uvicorn

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.supervisor import supervise
from gateway.edge.workermetrics import WorkerMetrics
from runtime.graphql_http import GraphQLHttpToolsProtocol
from runtime.logs import configure_logging
from runtime.otel import start_otel
from runtime.tracing import install_spans
from schema import CATALOGUE, View

__all__ = ["YOUNG_COLLECTION_OBJECTS", "run_gateway", "run_worker", "uvicorn_config"]

# the garbage collector's youngest generation is collected after this many more container
# objects were made than freed (Python's default is 700). Every request makes and frees
# hundreds, so with the default the gateway ran 3-4 full collections a second under
# load, 6% of its CPU (0.013 ms a request); with 10,000, no full one and 0.001 ms a request,
# and no young collection over 5 ms (tests/bench/RESULTS.md, Optimizations)
YOUNG_COLLECTION_OBJECTS = 10_000

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, worker: str = "") -> None:
        super().__init__(config)
        self.worker = worker  # " (worker i of n)" in its ready line, or ""

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
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_COLLECTION_OBJECTS, older, oldest)
        scheme = "https" if self.config.is_ssl else "http"
        url = f"{scheme}://{self.config.host}:{self.config.port}/graphql"
        log.info("statefed gateway: ready on %s%s", url, self.worker)


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
    clients; returns normally after either. With `config.processes` > 1, run that many
    worker processes of the built-in catalogue instead (`gateway.edge.supervisor`)."""
    if config.processes > 1 and tuple(catalogue) != CATALOGUE:
        raise config.config_error(
            "STATEFED_GATEWAY_PROCESSES",
            f"is {config.processes}, and worker processes serve the built-in catalogue "
            "only: set it to 1 to serve another",
        )
    _configure_logging(config)
    if config.processes == 1:
        _serve(_Server(uvicorn_config(GatewayApp(config, catalogue=catalogue))), config)
        return
    code = supervise(config)
    if code != 0:
        raise SystemExit(code)
    log.info("statefed gateway: stopped")


def run_worker(config: GatewayConfig, index: int, count: int, directory: Path) -> None:
    """Serve as worker `index` of `count` (`gateway.edge.worker`): the port bound with
    SO_REUSEPORT, the other workers' metrics gathered through `directory`."""
    _configure_logging(config)
    try:
        sock = _reuse_port_socket(config.host, config.port)
    except OSError as exc:
        log.error(
            "statefed gateway: worker %d could not bind %s:%d (%s): a process without "
            "SO_REUSEPORT, or of another user, holds it; stop it or choose another "
            "STATEFED_GATEWAY_PORT",
            index,
            config.host,
            config.port,
            exc,
        )
        raise SystemExit(1) from None
    workers = WorkerMetrics(directory, index, count)
    app = GatewayApp(config, workers=workers)
    _serve(_Server(uvicorn_config(app), f" (worker {index} of {count})"), config, [sock])


def _configure_logging(config: GatewayConfig) -> None:
    configure_logging("gateway", config.log_format, config.log_level)
    # the ready and stopped lines show at every level (a person or a script waits for them),
    # as log lines so that they are JSON in JSON mode
    log.setLevel(logging.INFO)


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port with SO_REUSEPORT, for uvicorn to listen on; OSError
    when the address cannot be bound (a process without SO_REUSEPORT, or of another user,
    holds the port)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _serve(
    server: _Server, config: GatewayConfig, sockets: list[socket.socket] | None = None
) -> None:
    spans = start_otel("gateway", os.environ)
    install_spans(spans)
    try:
        server.run(sockets=sockets)
    finally:
        if spans is not None:
            spans.shutdown()
    if not server.started:  # uvicorn has logged why
        log.error("statefed gateway: could not start on %s:%d", config.host, config.port)
        raise SystemExit(1)
    log.info("statefed gateway: stopped%s", server.worker)
