"""Point queries with the gateway cache on (every answer a hit) and off, against the floor.

Two more gateways join the cluster for this step, one with STATEFED_GATEWAY_CACHE=true and
one with STATEFED_GATEWAY_CACHE=false (the cluster's own gateway keeps its defaults), and
the floor answers the same keys. Every key is asked once through each gateway before its
load, so with the cache on the measured load asks only cached keys; nothing is produced
meanwhile, so every cached row stays current. Each load runs at 32 connections, back to
back: floor, cache on, cache off. The nodes' CPU per request tells whether the cache
answered: a hit costs them nothing, so with the cache on they should do (almost) no work.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil

from gateway.config import GatewayConfig
from tests.bench.graphql import point_body
from tests.bench.loadgen import LoadResult
from tests.bench.point import check_answers, start_floor
from tests.bench.report import Report, Section, fmt_ms, fmt_num, fmt_ratio
from tests.bench.session import BenchSession
from tooling.broker import free_port
from tooling.processes import ManagedProcess, wait_until

__all__ = ["NAME", "SETTING", "TITLE", "measure"]

NAME = "cache"
TITLE = "Point query with the gateway cache: hits and cache off vs the floor"
SETTING = "STATEFED_GATEWAY_CACHE"
CONNECTIONS = 32
# with the cache answering, the nodes' CPU per request falls below this share of theirs
# with it off; above it the setting made no visible difference
_EFFECT_SHARE = 0.5
TARGETS = {"floor": None, "cache on": "true", "cache off": "false"}
_WARM_THREADS = 8  # requests at once while every key is asked


def _node_cpu_seconds(session: BenchSession) -> float:
    total = 0.0
    for part, pid in session.pids().items():
        if part.startswith("node"):
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
    return total


def _start_gateway(session: BenchSession, name: str, cache: str) -> tuple[ManagedProcess, str]:
    """A gateway of the cluster with STATEFED_GATEWAY_CACHE=`cache`, routing every partition."""
    port = free_port()
    env = session.cluster.env(STATEFED_GATEWAY_PORT=str(port), **{SETTING: cache})
    log = session.settings.workdir / "cache" / f"gateway-{name.replace(' ', '-')}.log"
    process = ManagedProcess(f"gateway {name}", ["gateway"], env, log).start()
    health = f"http://127.0.0.1:{port}/health"
    process.wait_for_http(health, session.timeout_s(60))

    def routable() -> bool:
        try:
            body = httpx.get(health, timeout=2.0).json()
        except (httpx.HTTPError, ValueError):
            return False
        return len(body.get("routable", [])) == session.settings.partitions

    wait_until(routable, session.timeout_s(60), f"gateway {name} to route every partition", 0.2)
    session.progress(f"gateway {name} ({SETTING}={cache}): serving on port {port}")
    return process, f"http://127.0.0.1:{port}/graphql"


# lookups of a key before the gateway cache fills it (STATEFED_GATEWAY_CACHE_ADMIT_AFTER)
_ADMIT_AFTER: int = {f.name: f for f in dataclasses.fields(GatewayConfig)}[
    "cache_admit_after"
].default  # type: ignore[assignment]


def _ask_each(session: BenchSession, url: str, bodies: list[bytes]) -> None:
    """Every key asked as often as the cache needs to admit it (a few at a time): with the
    cache on, all are cached after."""

    def ask(body: bytes) -> None:
        session.client.post(url, body)

    with ThreadPoolExecutor(_WARM_THREADS) as pool:
        for _ in range(_ADMIT_AFTER):
            list(pool.map(ask, bodies))


def _load(
    session: BenchSession, urls: dict[str, str], bodies: list[bytes]
) -> tuple[dict[str, LoadResult], dict[str, float]]:
    """Each target at 32 connections; and the nodes' CPU ms per 1,000 requests meanwhile."""
    settings = session.settings
    results: dict[str, LoadResult] = {}
    node_ms: dict[str, float] = {}
    for target, url in urls.items():
        if target != "floor":
            _ask_each(session, url, bodies)
        session.load.run(url, bodies, CONNECTIONS, settings.warmup_s)
        cpu = _node_cpu_seconds(session)
        result = session.load.run(url, bodies, CONNECTIONS, settings.point_s)
        node_ms[target] = (_node_cpu_seconds(session) - cpu) * 1e6 / max(1, result.requests)
        results[target] = result
        session.progress(
            f"{target} c={CONNECTIONS}: {result.rps:,.0f} req/s, p50 {result.p50_ms:.2f} ms, "
            f"p99 {result.p99_ms:.2f} ms, errors {result.errors}, "
            f"node CPU {node_ms[target]:.0f} ms per 1,000 requests"
        )
    return results, node_ms


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _write(section: Section, results: dict[str, LoadResult], node_ms: dict[str, float]) -> None:
    floor = results["floor"]
    ratios = {
        "hits_over_floor_rps_c32": _ratio(results["cache on"].rps, floor.rps),
        "off_over_floor_rps_c32": _ratio(results["cache off"].rps, floor.rps),
        "hits_over_off_rps_c32": _ratio(results["cache on"].rps, results["cache off"].rps),
        "hits_over_floor_p99_c32": _ratio(results["cache on"].p99_ms, floor.p99_ms),
    }
    on, off = node_ms["cache on"], node_ms["cache off"]
    effective = off > 0 and on < _EFFECT_SHARE * off
    table = section.table(
        "target",
        "requests/s",
        "p50",
        "p99",
        "x floor req/s",
        "node CPU per 1,000 requests",
        "errors",
    )
    for target, r in results.items():
        table.add(
            target,
            fmt_num(r.rps),
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            fmt_ratio(_ratio(r.rps, floor.rps)),
            "-" if target == "floor" else f"{node_ms[target]:,.0f} ms",
            r.errors,
        )
    section.figures.update(
        runs={f"{t.replace(' ', '_')}_c32": r.to_json() for t, r in results.items()},
        ratios=ratios,
        node_cpu_ms_per_1000={t.replace(" ", "_"): round(ms, 1) for t, ms in node_ms.items()},
        cache_effective=effective,
    )
    if not effective:
        section.notes.append(
            f"**{SETTING} made no visible difference**: the nodes used {on:,.0f} ms of CPU per "
            f"1,000 requests with it true and {off:,.0f} ms with it false, so they answered "
            "the requests either way (a gateway without the cache ignores the setting). "
            "The 'cache on' figures are then those of a gateway without a cache."
        )


def measure(session: BenchSession, report: Report) -> None:
    """Load the floor, a gateway with the cache on and one with it off, same keys."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(2)
    settings = session.settings
    indexes = session.dataset.sample(settings.point_keys, seed=2)
    bodies = [point_body(session.dataset.key(i)) for i in indexes]
    started: list[ManagedProcess] = []
    try:
        floor, floor_url = start_floor(session, indexes)
        started.append(floor)
        urls = {"floor": floor_url}
        for target, cache in TARGETS.items():
            if cache is not None:
                gateway, urls[target] = _start_gateway(session, target, cache)
                started.append(gateway)
        check_answers(session, urls, indexes)
        section.figures["idle_wait_seconds"] = round(session.quiet(), 1)
        results, node_ms = _load(session, urls, bodies)
    finally:
        for process in reversed(started):
            process.stop()
    _write(section, results, node_ms)
    section.figures.update(load_generator=session.load.tool, nodes=len(session.live))
    section.notes.append(
        f"{len(indexes):,} distinct keys over every partition, each asked {_ADMIT_AFTER} "
        "times through a gateway before its load (what the cache's admission needs), then "
        f"cycled by {session.load.tool} at {CONNECTIONS} "
        f"connections for {settings.point_s:g} s after a {settings.warmup_s:g} s warm-up. "
        f"Two gateways started for this step ({SETTING}=true and false), {len(session.live)} "
        "nodes; node CPU per request is measured over the nodes' processes during each load "
        "(a cache hit should cost the nodes nothing)."
    )
