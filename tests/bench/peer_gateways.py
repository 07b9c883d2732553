"""The peer gateways users would pick instead, in front of one statefed node.

The Hive Gateway and the Apollo Gateway (with Apollo Server), run with Node, and Grafbase's
gateway (Rust: `grafbase dev` of the Grafbase CLI, whose npm package carries the x86_64
Linux binary), pinned and installed with npm into `.cache/npm-peers/` of the checkout
(ignored by git) the first time, then reused; and Apollo Router (Rust), the crate
`apollo-router` built from crates.io by `make apollo-router` into `.cache/apollo-router/`
(about 12 minutes on 2 cores, once). The supergraph is composed by `@apollo/composition`
from the SDL the node itself serves (`_service { sdl }`), with the node's GraphQL URL as the
subgraph's, and Apollo Router runs it too; Grafbase composes the same SDL itself, named with
that URL in a `grafbase.toml` beside it. All listen on 127.0.0.1 with their defaults
(NODE_ENV=production, Apollo's telemetry off; Grafbase exports no telemetry unless told;
Apollo Router's homepage and health check off, its path `/graphql`).

Cosmo Router (Go) is not among them: the Go module proxy this project installs from refuses
`github.com/wundergraph/cosmo/router` (403 for its version list, `@latest`, every tag tried
and a commit), so no Makefile target can build it. Built once by hand from a snapshot of its
repository, it was slower than Grafbase on every shape of the `shapes` step (RESULTS.md,
"Cosmo Router, measured once beside Grafbase").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import orjson

from tests import npm
from tooling.broker import free_port
from tooling.processes import ManagedProcess, wait_until

__all__ = ["PACKAGES", "PEERS", "compose", "install", "start_peer", "wait_answering"]

PREFIX = npm.CACHE / "npm-peers"
SCRIPT = Path(__file__).with_name("peers.mjs")
PACKAGES = {
    "@graphql-hive/gateway": "2.15.1",
    "@apollo/gateway": "2.14.4",
    "@apollo/composition": "2.14.4",
    "@apollo/server": "5.5.1",
    "graphql": "16.15.0",
    "@grafbase/cli-x86_64-unknown-linux-musl": "0.103.0",
}
PEERS = ("hive", "apollo", "grafbase", "apollo_router")
ROUTER_VERSION = "2.17.0"  # the Makefile's ROUTER_VERSION, which builds it
ROUTER = npm.CACHE / "apollo-router" / ROUTER_VERSION / "bin" / "router"
_ENV = {
    "NODE_ENV": "production",
    "APOLLO_TELEMETRY_DISABLED": "1",  # no metrics to Apollo's endpoint: loopback only
}
SUBGRAPH = "statefed"
GRAFBASE_CONFIG = "grafbase.toml"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("Node.js 20 or newer is needed to run the peer gateways")
    return node


def install() -> Path:
    """The npm prefix holding the pinned peers, installed unless they already are."""
    return npm.install(PREFIX, PACKAGES, "the peer gateways of the benchmark")


def _sdl(node_url: str) -> str:
    body = orjson.dumps({"query": "{ _service { sdl } }"})
    response = httpx.post(
        node_url, content=body, headers={"content-type": "application/json"}, timeout=10.0
    )
    sdl: str = response.json()["data"]["_service"]["sdl"]
    return sdl


def _grafbase(prefix: Path) -> Path:
    return prefix / "node_modules" / "@grafbase" / "cli-x86_64-unknown-linux-musl" / "grafbase"


def compose(prefix: Path, node_url: str, workdir: Path) -> Path:
    """The supergraph of the node's subgraph, written to `workdir` with Grafbase's
    configuration of the same subgraph (`grafbase.toml`); raises with the composition's
    errors or hints."""
    workdir.mkdir(parents=True, exist_ok=True)
    sdl, supergraph = workdir / "node.graphql", workdir / "supergraph.graphql"
    sdl.write_text(_sdl(node_url))
    (workdir / GRAFBASE_CONFIG).write_text(
        f"[subgraphs.{SUBGRAPH}]\nurl = {orjson.dumps(node_url).decode()}\n"
        f"schema_path = {orjson.dumps(str(sdl)).decode()}\n"
    )
    args = [str(prefix), "compose", SUBGRAPH, node_url, str(sdl), str(supergraph)]
    done = subprocess.run(
        [_node(), str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"composing the node's SDL failed: {done.stderr[-2000:]}")
    return supergraph


def start_peer(
    peer: str, prefix: Path, supergraph: Path, workdir: Path, probe: bytes, timeout_s: float
) -> tuple[ManagedProcess, str]:
    """Start `peer` (hive, apollo, grafbase or apollo_router) and wait until it answers
    `probe` with data."""
    port = free_port()
    command = [_node(), str(SCRIPT), str(prefix), peer, str(supergraph), str(port)]
    if peer == "grafbase":
        config = supergraph.with_name(GRAFBASE_CONFIG)
        listen = f"127.0.0.1:{port}"
        command = [str(_grafbase(prefix)), "dev", "-c", str(config), "--listen-address", listen]
    elif peer == "apollo_router":
        command = _router_command(supergraph, port)
    env = {**os.environ, **_ENV}
    process = ManagedProcess.of_command(peer, command, env, workdir / f"{peer}.log").start()
    url = f"http://127.0.0.1:{port}/graphql"
    wait_answering(process, url, probe, timeout_s)
    return process, url


def _router_command(supergraph: Path, port: int) -> list[str]:
    """Apollo Router on `port` over `supergraph`, with a configuration beside it."""
    if not ROUTER.exists():
        raise RuntimeError(f"Apollo Router is not built at {ROUTER}: run `make apollo-router`")
    config = supergraph.with_name("router.yaml")
    config.write_text(
        f"supergraph:\n  listen: 127.0.0.1:{port}\n  path: /graphql\n"
        "homepage:\n  enabled: false\nhealth_check:\n  enabled: false\n"
    )
    return [str(ROUTER), "--supergraph", str(supergraph), "--config", str(config),
            "--anonymous-telemetry-disabled", "--log", "warn"]  # fmt: skip


def wait_answering(process: ManagedProcess, url: str, probe: bytes, timeout_s: float) -> None:
    """Wait until `process` answers `probe` at `url` with data; stops it if it never does."""

    def answers() -> bool:
        if not process.running():
            raise RuntimeError(
                f"{process.name} exited; see {process.log_path}:\n{process.log_tail()}"
            )
        try:
            response = httpx.post(
                url, content=probe, headers={"content-type": "application/json"}, timeout=5.0
            )
            return response.status_code == 200 and bool(response.json().get("data"))
        except (httpx.HTTPError, ValueError):
            return False

    try:
        wait_until(answers, timeout_s, f"{process.name} to answer on {url}", 0.2)
    except BaseException:
        process.stop()
        raise
