"""Fan-out: multi-key (100 keys) and top-10 lookups through the gateway over 1, 2, 3 nodes."""

from __future__ import annotations

from collections.abc import Callable

from tests.bench.graphql import many_body, point_body, top_body
from tests.bench.loadgen import LoadResult
from tests.bench.report import Report, Section, Table, fmt_ms, fmt_num, fmt_ratio
from tests.bench.session import BenchError, BenchSession

__all__ = ["NAME", "measure_at"]

NAME = "fanout"
TITLE = "Fan-out: multi-key and top-N through the gateway vs a point query"
_BODY_SETS = 20  # different multi-key bodies the load cycles through


def _bodies(session: BenchSession) -> dict[str, list[bytes]]:
    ds, settings = session.dataset, session.settings
    keys = [ds.key(i) for i in ds.sample(500, seed=2)]
    many = [
        many_body([ds.key(i) for i in ds.sample(settings.fanout_keys, seed=100 + n)])
        for n in range(_BODY_SETS)
    ]
    return {
        "point": [point_body(k) for k in keys],
        f"many{settings.fanout_keys}": many,
        f"top{settings.top_limit}": [top_body(settings.top_limit)],
    }


def _check_top(session: BenchSession) -> None:
    """The gateway's global top-N is the data set's, before its latency is measured."""
    limit, view = session.settings.top_limit, session.dataset.view
    document = session.client.post(session.gateway_url, top_body(limit))
    got = [row[view.key_field] for row in (document.get("data") or {}).get(view.top_field) or []]
    expected = session.dataset.top_keys[:limit]
    if got != expected:
        raise BenchError(f"gateway top {limit} is {got}, expected the data set's {expected}")


def _table(section: Section) -> Table:
    if section.tables:
        return section.tables[0]
    return section.table("nodes", "query", "requests/s", "p50", "p99", "p50 x point", "errors")


def _measure(session: BenchSession, report: Report, nodes: int) -> None:
    section = report.section(NAME, TITLE)
    session.ensure_nodes(nodes)
    session.ensure_gateway()
    if len(session.live) != nodes:
        raise BenchError(f"fan-out over {nodes} nodes, but {len(session.live)} are live")
    _check_top(session)
    bodies = _bodies(session)
    session.quiet()
    session.load.run(session.gateway_url, bodies["point"], 1, session.settings.warmup_s)
    results: dict[str, LoadResult] = {}
    for query, query_bodies in bodies.items():
        results[query] = session.load.run(
            session.gateway_url, query_bodies, 1, session.settings.fanout_s
        )
    point_p50 = results["point"].p50_ms
    figures: dict[str, object] = {q: r.to_json() for q, r in results.items()}
    table = _table(section)
    for query, r in results.items():
        ratio = r.p50_ms / point_p50 if point_p50 else None
        figures[f"{query}_over_point_p50"] = None if ratio is None else round(ratio, 2)
        table.add(
            nodes,
            query,
            fmt_num(r.rps),
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            fmt_ratio(ratio),
            r.errors,
        )
        session.progress(
            f"fan-out {nodes} nodes {query}: p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms"
        )
    section.figures[f"nodes_{nodes}"] = figures
    if len(section.notes) == 0:
        section.notes.append(
            f"One connection, closed loop, {session.settings.fanout_s:g} s per query; "
            f"{session.settings.fanout_keys} random keys per multi-key request (over all "
            f"partitions, so over every node), {_BODY_SETS} different key sets in turn."
        )


def measure_at(nodes: int) -> Callable[[BenchSession, Report], None]:
    """The fan-out step with exactly `nodes` live nodes."""

    def step(session: BenchSession, report: Report) -> None:
        _measure(session, report, nodes)

    return step
