"""Point queries: the gateway (2 nodes) vs the owning node vs the floor, at 1 and 32 connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from node.storage.store import ChangeBatch, LevelDBStore
from schema import CountRow
from tests.bench.graphql import point_body
from tests.bench.loadgen import LoadResult
from tests.bench.profile import Profile, ProfileRecorder, find_py_spy, write_profiles
from tests.bench.report import Report, Section, fmt_ms, fmt_num, fmt_ratio
from tests.bench.session import BenchError, BenchSession, bench_process
from tooling.broker import free_port
from tooling.processes import ManagedProcess

__all__ = ["NAME", "check_answers", "measure", "start_floor"]

NAME = "point"
TITLE = "Point query: gateway vs owning node vs floor"
TARGETS = ("floor", "node", "gateway")


def _floor_db(session: BenchSession, indexes: list[int], path: Path) -> None:
    """The floor's LevelDB: the queried keys, in the node's store format."""
    batch = ChangeBatch()
    view = session.dataset.view
    for i in indexes:
        batch.put_count(view.name, CountRow(session.dataset.key(i), session.dataset.count(i), 0))
    with LevelDBStore(path) as store:
        store.apply(batch)


def start_floor(session: BenchSession, indexes: list[int]) -> tuple[ManagedProcess, str]:
    base = session.settings.workdir / "floor"
    _floor_db(session, indexes, base / "db")
    port = free_port()
    args = ["--db", str(base / "db"), "--port", str(port)]
    floor = bench_process("floor", "tests.bench.floor", args, base / "floor.log").start()
    floor.wait_for_http(f"http://127.0.0.1:{port}/health", 30.0)
    return floor, f"http://127.0.0.1:{port}/graphql"


def check_answers(session: BenchSession, urls: dict[str, str], indexes: list[int]) -> None:
    """Every target answers the right count before it is loaded."""
    view = session.dataset.view
    for target, url in urls.items():
        for i in indexes[:3]:
            document = session.client.post(url, point_body(session.dataset.key(i)))
            row = (document.get("data") or {}).get(view.point_field)
            if not row or row["count"] != session.dataset.count(i):
                raise BenchError(f"{target} at {url} answered {document} for key index {i}")


def _run_loads(
    session: BenchSession, urls: dict[str, str], bodies: list[bytes]
) -> dict[tuple[str, int], LoadResult]:
    settings = session.settings
    results: dict[tuple[str, int], LoadResult] = {}
    for target in TARGETS:
        session.load.run(urls[target], bodies, max(settings.point_connections), settings.warmup_s)
        for connections in settings.point_connections:
            result = session.load.run(urls[target], bodies, connections, settings.point_s)
            results[(target, connections)] = result
            session.progress(
                f"point {target} c={connections}: {result.rps:,.0f} req/s, "
                f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, errors {result.errors}"
            )
    return results


def _profile(session: BenchSession, url: str, bodies: list[bytes], owner: str) -> list[Profile]:
    """py-spy on the gateway and the owning node while the gateway is under load."""
    py_spy = find_py_spy(session.settings.py_spy)
    gateway, node = session.cluster.gateway, session.cluster.nodes[owner]
    if py_spy is None or gateway is None or gateway.pid is None or node.pid is None:
        return []
    seconds = session.settings.profile_s
    recorder = ProfileRecorder(py_spy, session.settings.workdir / "profiles")
    started = [
        recorder.start("gateway", gateway.pid, seconds),
        recorder.start(f"node {owner}", node.pid, seconds),
    ]
    session.load.run(url, bodies, max(session.settings.point_connections), seconds + 1)
    return [recorder.finish(s, seconds + 20) for s in started]


def _ratio(a: float, b: float, digits: int = 2) -> float | None:
    return round(a / b, digits) if b else None


def _ratios(
    results: dict[tuple[str, int], LoadResult], connections: tuple[int, ...]
) -> dict[str, Any]:
    """gateway/floor and node/floor of requests/s, p50 and p99 at each connection count."""
    ratios: dict[str, Any] = {}
    for c in connections:
        floor = results[("floor", c)]
        for target in ("gateway", "node"):
            r = results[(target, c)]
            ratios[f"{target}_over_floor_rps_c{c}"] = _ratio(r.rps, floor.rps, 3)
            ratios[f"{target}_over_floor_p50_c{c}"] = _ratio(r.p50_ms, floor.p50_ms)
            ratios[f"{target}_over_floor_p99_c{c}"] = _ratio(r.p99_ms, floor.p99_ms)
    return ratios


def _write(
    section: Section, results: dict[tuple[str, int], LoadResult], ratios: dict[str, Any]
) -> None:
    table = section.table(
        "target",
        "connections",
        "requests/s",
        "p50",
        "p99",
        "x floor req/s",
        "x floor p99",
        "errors",
    )
    for (target, c), r in results.items():
        rps_ratio = ratios.get(f"{target}_over_floor_rps_c{c}", 1.0 if target == "floor" else None)
        p99_ratio = ratios.get(f"{target}_over_floor_p99_c{c}", 1.0 if target == "floor" else None)
        table.add(
            target,
            c,
            fmt_num(r.rps),
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            fmt_ratio(rps_ratio),
            fmt_ratio(p99_ratio),
            r.errors,
        )
    section.figures["runs"] = {f"{t}_c{c}": r.to_json() for (t, c), r in results.items()}
    section.figures["ratios"] = ratios


def _write_profiles(section: Section, profiles: list[Profile]) -> None:
    seconds = profiles[0].samples / 250 if profiles else 0
    write_profiles(
        section,
        profiles,
        f"Profiles: py-spy at 250 Hz for {seconds:.0f} s of the gateway under the 32-connection "
        "point load (a separate run, not the measured one), every thread sampled. Self time in "
        "`Runner.run (asyncio/runners.py)` is uvloop's native event loop (socket I/O, callbacks "
        "in C and waiting in epoll), which py-spy attributes to the Python frame that started "
        "it.",
    )


def measure(session: BenchSession, report: Report) -> None:
    """Load the floor, the owning node and the gateway with the same point queries."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(2)
    session.ensure_gateway()
    owners = session.owners() or {}
    owner = session.live[0]
    held = [p for p, n in owners.items() if n == owner]
    indexes = session.dataset.sample(session.settings.point_keys, seed=1, partitions=held)
    bodies = [point_body(session.dataset.key(i)) for i in indexes]
    floor, floor_url = start_floor(session, indexes)
    try:
        urls = {
            "floor": floor_url,
            "node": session.node_graphql(owner),
            "gateway": session.gateway_url,
        }
        check_answers(session, urls, indexes)
        section.figures["idle_wait_seconds"] = round(session.quiet(), 1)
        results = _run_loads(session, urls, bodies)
    finally:
        floor.stop()
    ratios = _ratios(results, session.settings.point_connections)
    _write(section, results, ratios)
    section.figures.update(
        load_generator=session.load.tool, nodes=len(session.live), keys=len(indexes)
    )
    _write_profiles(section, _profile(session, session.gateway_url, bodies, owner))
    section.notes.append(
        f"{len(indexes):,} distinct keys, all in partitions {held} of node {owner}, cycled by "
        f"the load generator ({session.load.tool}, one thread, closed loop, "
        f"{session.settings.point_s:g} s per run after a warm-up). The floor answers "
        '`{"data":{"wordCount":{...}}}` from one plyvel get, without GraphQL and without '
        "`extensions.freshness`; the node and the gateway answer the full response."
    )
