"""Peers: the statefed gateway against the Hive, Apollo and Grafbase gateways, one node.

One node holds every partition; in front of it the cluster's statefed gateway (its
defaults), the Hive Gateway, the Apollo Gateway and Grafbase's gateway (from a supergraph
composed from the node's own SDL). Each of them, the node directly and the floor is loaded
with wrk in two forms: one query text with the key in a variable, and the key written into
the text (as many texts as keys), at 1 and 32 connections, in interleaved rounds. Every answer
under load is checked against the data set (`wrk_checked.lua`), and a sample of answers
of each target and form is checked before its load, field by field.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
import psutil

from schema import View
from tests.bench.checked_load import CheckedLoad, CheckedRun
from tests.bench.graphql import point_body
from tests.bench.peer_figures import Cell, Round, in_turn, join_rounds, peer_ratios
from tests.bench.peer_gateways import PEERS, compose, install, start_peer, wait_answering
from tests.bench.point import start_floor
from tests.bench.report import Report, Section, fmt_ms, fmt_num, fmt_ratio
from tests.bench.session import BenchError, BenchSession
from tooling.broker import free_port
from tooling.processes import ManagedProcess

__all__ = [
    "FORMS",
    "NAME",
    "TARGETS",
    "TITLE",
    "Targets",
    "literal_body",
    "measure",
    "start_gateway",
    "start_gateway_cache_off",
    "start_peers",
    "write",
]

NAME = "peers"
TITLE = (
    "Peers: statefed gateway vs the Hive and Apollo gateways, Grafbase and Apollo Router, one "
    "node, two query forms"
)
# the cluster's gateway with its defaults (its cache on), and one with STATEFED_GATEWAY_CACHE
# off that, like the peers, asks the node for every answer: issue 18's goals are judged on it
OURS = ("gateway", "gateway_cache_off")
TARGETS = (*OURS, *PEERS, "node", "floor")
LABELS = {
    "gateway": "statefed gateway (defaults: cache on)",
    "gateway_cache_off": "statefed gateway, cache off",
    "hive": "Hive Gateway",
    "apollo": "Apollo Gateway",
    "grafbase": "Grafbase Gateway",
    "apollo_router": "Apollo Router",
    "node": "node direct",
    "floor": "floor",
}
FORMS = ("variables", "literals")
_SAMPLE = 20  # answers of each target and form checked field by field before the load
CellKey = tuple[str, str, int]


def literal_body(key: str, view: View) -> bytes:
    """The point query with the key written into its text (no variables)."""
    k = view.key_field
    query = f"{{ {view.point_field}({k}: {orjson.dumps(key).decode()}) {{ {k} count }} }}"
    return orjson.dumps({"query": query})


def _bodies(session: BenchSession, indexes: list[int]) -> dict[str, list[bytes]]:
    keys = [session.dataset.key(i) for i in indexes]
    view = session.dataset.view
    return {
        "variables": [point_body(k, view) for k in keys],
        "literals": [literal_body(k, view) for k in keys],
    }


def _check_sample(
    session: BenchSession, url: str, target: str, indexes: list[int], bodies: list[bytes]
) -> None:
    """The first answers of `bodies`, field by field, against the data set."""
    view = session.dataset.view
    for i, body in list(zip(indexes, bodies, strict=True))[:_SAMPLE]:
        document = session.client.post(url, body)
        row = (document.get("data") or {}).get(view.point_field)
        want = {view.key_field: session.dataset.key(i), "count": session.dataset.count(i)}
        if document.get("errors") or row != want:
            raise BenchError(f"{target} at {url} answered {document} for {want}, not that row")


def _cpu_s(pid: int | None) -> float:
    """CPU seconds of process `pid` and its live children (a gateway's worker processes)."""
    if pid is None:
        return 0.0
    process = psutil.Process(pid)
    total = 0.0
    for one in (process, *process.children(recursive=True)):
        try:
            t = one.cpu_times()
        except psutil.NoSuchProcess:  # a child that exited meanwhile
            continue
        total += t.user + t.system
    return total


class Targets:
    """The URLs and serving processes (front, node behind it) of the loaded targets."""

    def __init__(self, node: ManagedProcess, node_url: str) -> None:
        self.urls: dict[str, str] = {"node": node_url}
        self.front: dict[str, int | None] = {"node": node.pid}
        self.node_pid = node.pid

    def add(self, target: str, url: str, pid: int | None) -> None:
        self.urls[target] = url
        self.front[target] = pid

    def measured(self, target: str, run: Callable[[], CheckedRun]) -> Round:
        """`run()` with the CPU seconds of `target`'s serving processes meanwhile."""
        behind = target not in ("node", "floor")
        front, node = self.front[target], self.node_pid if behind else None
        before = (_cpu_s(front), _cpu_s(node))
        result = run()
        load = result.load
        return Round(
            requests=load.requests,
            seconds=load.seconds,
            p50_ms=load.p50_ms,
            p99_ms=load.p99_ms,
            checked=result.checked,
            wrong=result.wrong,
            failed=result.failed,
            front_cpu_s=_cpu_s(front) - before[0],
            node_cpu_s=_cpu_s(node) - before[1],
        )


def _load(
    session: BenchSession, targets: Targets, bodies: dict[str, list[bytes]], load: CheckedLoad
) -> dict[CellKey, Cell]:
    """A warm-up per target and form, then the rounds: every cell once per round."""
    settings = session.settings
    top = max(settings.point_connections)
    for form in FORMS:
        for target in TARGETS:
            load.run(targets.urls[target], bodies[form], top, settings.warmup_s)
    rounds: dict[CellKey, list[Round]] = {}
    for number in range(1, settings.peers_rounds + 1):
        for form in FORMS:
            for c in settings.point_connections:
                for target in in_turn(TARGETS, number):
                    run = partial(load.run, targets.urls[target], bodies[form], c, settings.peers_s)
                    one = targets.measured(target, run)
                    rounds.setdefault((target, form, c), []).append(one)
                    session.progress(
                        f"peers round {number} {form} c={c} {target}: "
                        f"{one.requests / max(one.seconds, 1e-9):,.0f} req/s, "
                        f"p50 {one.p50_ms:.2f} ms, p99 {one.p99_ms:.2f} ms, "
                        f"checked {one.checked:,}, wrong {one.wrong}, failed {one.failed}"
                    )
    return {key: join_rounds(runs) for key, runs in rounds.items()}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def _write_overview(section: Section, cells: dict[CellKey, Cell]) -> None:
    """Issue 18's table: a row per form and connection count, req/s and p99 per target."""
    table = section.table("form", "connections", *(LABELS[t] for t in TARGETS))
    for form in FORMS:
        for c in sorted({n for (_, _, n) in cells}):
            row = [cells.get((t, form, c)) for t in TARGETS]
            table.add(
                form,
                c,
                *("-" if x is None else f"{fmt_num(x.rps)}, p99 {fmt_ms(x.p99_ms)}" for x in row),
            )


def write(section: Section, cells: dict[CellKey, Cell], ratios: dict[str, Any]) -> None:
    _write_overview(section, cells)
    for (target, form, c), cell in cells.items():
        if cell.wrong or cell.failed or cell.checked != cell.requests:
            section.errors.append(
                f"{LABELS[target]}, {form}, {c} connections: {cell.wrong} wrong answers and "
                f"{cell.failed} failed requests; {cell.checked:,} of {cell.requests:,} checked"
            )
    table = section.table(
        "form",
        "connections",
        "target",
        "requests/s",
        "p50",
        "p99",
        "CPU per request (front)",
        "CPU per request (node behind)",
        "answers checked",
        "wrong / failed",
    )
    for (target, form, c), cell in cells.items():
        table.add(
            form,
            c,
            LABELS[target],
            fmt_num(cell.rps),
            fmt_ms(cell.p50_ms),
            fmt_ms(cell.p99_ms),
            _ms(cell.front_cpu_ms),
            "-" if target in ("node", "floor") else _ms(cell.node_cpu_ms),
            f"{cell.checked:,} of {cell.requests:,}",
            f"{cell.wrong} / {cell.failed}",
        )
    _write_ratios(section, cells, ratios)
    section.figures["cells"] = {
        f"{t}_{f}_c{c}": cell.to_json() for (t, f, c), cell in cells.items()
    }
    section.figures["ratios"] = ratios


def _write_ratios(section: Section, cells: dict[CellKey, Cell], ratios: dict[str, Any]) -> None:
    table = section.table(
        "form",
        "connections",
        "statefed",
        "faster peer",
        "x its req/s",
        "x its p50",
        "x its p99",
        *(f"x {LABELS[p]} req/s" for p in PEERS),
    )
    connections = sorted({c for (_, _, c) in cells})
    for form in FORMS:
        for c in connections:
            suffix = f"_over_faster_peer_{form}_c{c}"
            peer = ratios.get(f"faster_peer_{form}_c{c}")
            for ours in OURS:
                if peer is None or f"{ours}_rps{suffix}" not in ratios:
                    continue
                table.add(
                    form,
                    c,
                    LABELS[ours],
                    LABELS[peer],
                    *(
                        fmt_ratio(ratios[f"{ours}_{what}{suffix}"])
                        for what in ("rps", "p50", "p99")
                    ),
                    *(fmt_ratio(ratios.get(f"{ours}_rps_over_{p}_{form}_c{c}")) for p in PEERS),
                )
    table = section.table("target", *(f"literals x variables req/s, c={c}" for c in connections))
    for target in TARGETS:
        table.add(
            LABELS[target],
            *(fmt_ratio(ratios.get(f"literals_over_variables_{target}_c{c}")) for c in connections),
        )


def start_gateway(
    session: BenchSession,
    probe: bytes,
    started: list[ManagedProcess],
    label: str,
    **env: str,
) -> tuple[str, int | None]:
    """Another gateway of the cluster, `env` on top of its defaults: URL and pid, once it
    answers `probe`. Its log is `<workdir>/gateways/<label>-<port>.log`."""
    port = free_port()
    environment = session.cluster.env(STATEFED_GATEWAY_PORT=str(port), **env)
    log = session.settings.workdir / "gateways" / f"{label.replace(' ', '-')}-{port}.log"
    process = ManagedProcess(f"gateway {label}", ["gateway"], environment, log).start()
    started.append(process)
    url = f"http://127.0.0.1:{port}/graphql"
    wait_answering(process, url, probe, session.timeout_s(60))
    session.progress(f"a gateway {label} serving on {url}")
    return url, process.pid


def start_gateway_cache_off(
    session: BenchSession, probe: bytes, started: list[ManagedProcess]
) -> tuple[str, int | None]:
    """A second gateway of the cluster with STATEFED_GATEWAY_CACHE=false: URL and pid."""
    return start_gateway(session, probe, started, "cache off", STATEFED_GATEWAY_CACHE="false")


def start_peers(
    session: BenchSession, node_url: str, probe: bytes, started: list[ManagedProcess]
) -> dict[str, tuple[str, int | None]]:
    """The peer gateways in front of the node: URL and pid of each."""
    workdir = session.settings.workdir / "peers"
    prefix = install()
    supergraph = compose(prefix, node_url, workdir)
    peers: dict[str, tuple[str, int | None]] = {}
    for peer in PEERS:
        process, url = start_peer(peer, prefix, supergraph, workdir, probe, session.timeout_s(60))
        started.append(process)
        peers[peer] = (url, process.pid)
        session.progress(f"peers: {peer} serving on {url}")
    return peers


def measure(session: BenchSession, report: Report) -> None:
    """Load every target in both forms at 1 and 32 connections, every answer checked."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(1)
    session.ensure_gateway()
    if len(session.live) != 1:
        raise BenchError(f"the peers step needs one node holding every partition: {session.live}")
    node_id = session.live[0]
    node, node_url = session.cluster.nodes[node_id], session.node_graphql(node_id)
    indexes = session.dataset.sample(session.settings.point_keys, seed=18)
    bodies = _bodies(session, indexes)
    started: list[ManagedProcess] = []
    try:
        targets = Targets(node, node_url)
        gateway, probe = session.cluster.gateway, bodies["variables"][0]
        targets.add("gateway", session.gateway_url, gateway.pid if gateway else None)
        targets.add("gateway_cache_off", *start_gateway_cache_off(session, probe, started))
        for peer, (url, pid) in start_peers(session, node_url, probe, started).items():
            targets.add(peer, url, pid)
        floor, floor_url = start_floor(session, indexes)
        started.append(floor)
        targets.add("floor", floor_url, floor.pid)
        for target, url in targets.urls.items():
            for form in FORMS:
                _check_sample(session, url, target, indexes, bodies[form])
        load = CheckedLoad(
            session.settings.workdir / "peers" / "load", session.dataset.view.key_field
        )
        load.set_truth({session.dataset.key(i): session.dataset.count(i) for i in indexes})
        section.figures["idle_wait_seconds"] = round(session.quiet(), 1)
        cells = _load(session, targets, bodies, load)
    finally:
        for process in reversed(started):
            process.stop()
    ratios = peer_ratios(cells, OURS, PEERS, FORMS, session.settings.point_connections)
    write(section, cells, ratios)
    _notes(section, session, len(indexes))


def _notes(section: Section, session: BenchSession, keys: int) -> None:
    s = session.settings
    section.figures.update(keys=keys, rounds=s.peers_rounds, seconds_per_run=s.peers_s)
    section.notes.append(
        f"One node holding all {s.partitions} partitions ({session.dataset.size:,} keys); "
        f"{keys:,} distinct keys cycled by wrk (one thread, closed loop). Variables: one "
        "query text, the key in `$word`; literals: the key written into the text, so "
        f"{keys:,} different texts. {s.peers_rounds} interleaved rounds of {s.peers_s:g} s "
        "per cell (the targets in turn, in reverse order every other round) after a "
        f"{s.warmup_s:g} s warm-up per target and form at "
        f"{max(s.point_connections)} connections; req/s over the rounds, p50 and p99 the "
        "mean of the rounds'. Every answer under load is checked by wrk's script against "
        "the data set (200, no errors, the right count for the key it names), and "
        f"{_SAMPLE} answers of each target and form field by field before the load."
    )
    section.notes.append(
        "The statefed gateway is measured twice: the cluster's, with its defaults (its "
        "cache on: a key asked three times is admitted, then answered without the node), "
        "and a second one with STATEFED_GATEWAY_CACHE=false, which asks the node for every "
        "answer as the "
        "peers do; issue 18's goals are judged on the second. The Hive Gateway "
        "(@graphql-hive/gateway 2.15.1, its runtime served by node:http) and the Apollo "
        "Gateway (@apollo/gateway 2.14.4 in @apollo/server 5.5.1, standalone) with theirs, "
        "NODE_ENV=production, from a supergraph @apollo/composition 2.14.4 composed from the "
        "node's `_service { sdl }`; Grafbase's gateway (Rust) is `grafbase dev` of the "
        "Grafbase CLI 0.103.0 (@grafbase/cli-x86_64-unknown-linux-musl) with the node's SDL "
        "and URL as its one subgraph; Apollo Router (Rust) is the crate apollo-router 2.17.0 "
        "built from crates.io (`make apollo-router`) over the same supergraph. Cosmo Router "
        "(Go) is missing: the Go module proxy here refuses its module. CPU per request is "
        "the CPU time of the process the load went to (front) and of the node behind it, "
        "over the requests of the cell."
    )
