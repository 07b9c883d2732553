"""CPU per lookup call of a node served by real uvicorn, as the gateway calls it: a node
app (node.serve.server's NodeServer and uvicorn settings, no lifespan: nothing consumes) over the
LevelDB stores of `tests.node.measure_lookups`, in a process of its own on loopback, loaded
with `wrk -t1 -c1` POSTing the gateway's lookup bodies with its headers; the figure is the
server process's CPU time (psutil, user and system) over the requests wrk completed, which
the other load on a shared machine does not inflate as it does wall time.
Run: `python -m tests.node.measure_server [--seconds S] [--connections C]` (wrk needed).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import orjson
import psutil

from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.server import NodeServer
from schema import WORD_COUNTS
from tests.node.measure_lookups import GATEWAY_HEADERS, LATEST, VIEWS, build_registry, lookups
from tooling.broker import free_port
from tooling.processes import poll_client, wait_until

_LUA = Path(__file__).resolve().parents[1] / "bench" / "wrk_post.lua"
_MARK = "BENCHJSON "
_BODIES = 200  # distinct bodies per case, sent in turn


def serve(root: Path, port: int) -> None:
    """Serve the measured stores on `port` until SIGTERM (the child process)."""
    registry, stores = build_registry(root)
    config = NodeConfig(port=port, url=f"http://127.0.0.1:{port}", fast_lookups=True)
    server = NodeServer(NodeApp(config, VIEWS, registry=registry))
    server.config.lifespan = "off"  # nothing to start: the stores are attached already
    try:
        server.run()
    finally:
        for store in stores:
            store.close()


def _wrk(url: str, bodies: Path, connections: int, seconds: int) -> dict[str, float]:
    headers = [f"{name.decode()}: {value.decode()}" for name, value in GATEWAY_HEADERS[1:]]
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        *(arg for header in headers for arg in ("-H", header)),
        "-s",
        str(_LUA),
        url,
        "--",
        str(bodies),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30)
    lines = [x for x in done.stdout.splitlines() if x.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed (exit {done.returncode}): {done.stderr} {done.stdout}")
    figures: dict[str, float] = orjson.loads(lines[-1][len(_MARK) :])
    if figures["bad_responses"] or figures["socket_errors"]:
        raise RuntimeError(f"wrk saw failed answers: {figures}")
    return figures


def _measure(
    server: psutil.Process, url: str, bodies: Path, connections: int, seconds: int
) -> tuple[float, float, float, float]:
    """CPU us per request (user, system), requests/s and p50 latency in us."""
    _wrk(url, bodies, connections, 1)  # warm-up: documents cached, connections made
    before = server.cpu_times()
    figures = _wrk(url, bodies, connections, seconds)
    after = server.cpu_times()
    requests = figures["requests"]
    user = (after.user - before.user) / requests * 1e6
    system = (after.system - before.system) / requests * 1e6
    return user, system, requests / (figures["duration_us"] / 1e6), figures["p50_us"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]))
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    with tempfile.TemporaryDirectory() as root:
        port = free_port()
        url = f"http://127.0.0.1:{port}/graphql"
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.node.measure_server", "--serve", root, str(port)]
        )
        try:
            server = psutil.Process(child.pid)
            with poll_client(timeout_s=5.0) as http:
                wait_until(
                    lambda: _answers(http, url) or child.poll() is not None, 60, "node server"
                )
            if child.poll() is not None:
                raise SystemExit(f"the node server exited with {child.returncode}")
            _report(server, url, Path(root), args.connections, args.seconds)
        finally:
            child.terminate()
            child.wait(30)


def _answers(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(url.replace("/graphql", "/health")).status_code == 200
    except httpx.HTTPError:
        return False


def _report(server: psutil.Process, url: str, root: Path, connections: int, seconds: int) -> None:
    print(f"node server CPU per call, us (wrk -t1 -c{connections}, {seconds} s each)")
    print(f"{'request':<32} {'user':>7} {'sys':>7} {'total':>7} {'req/s':>8} {'p50 us':>7}")
    for view in (WORD_COUNTS, LATEST):
        for size in (1, 32):
            body_of = lookups(view, size)
            bodies = root / f"{view.name}-{size}.bodies"
            bodies.write_bytes(b"\n".join(body_of(n) for n in range(_BODIES)) + b"\n")
            user, system, rps, p50 = _measure(server, url, bodies, connections, seconds)
            name = f"{view.name} lookup, {size} keys"
            print(
                f"{name:<32} {user:>7.1f} {system:>7.1f} {user + system:>7.1f} "
                f"{rps:>8.0f} {p50:>7.0f}"
            )


if __name__ == "__main__":
    main()
