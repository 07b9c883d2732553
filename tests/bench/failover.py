"""Failover: SIGKILL a node, then time until every key is answerable through the gateway.

Measured twice: with standby replicas (the nodes' default, one standby copy per
partition, and the gateway allowed to read a standby; session.GATEWAY_ENV), then without
(every node restarted with STATEFED_STANDBY_REPLICAS=0), each by killing the newest node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.bench.graphql import many_body
from tests.bench.report import Report, Section
from tests.bench.session import GATEWAY_ENV, BenchError, BenchSession
from tooling.processes import wait_until

__all__ = ["NAME", "answerable", "measure", "standby_ready"]

NAME = "failover"
TITLE = "Failover: SIGKILL of a node until every key is answerable"
_PER_PARTITION = 5  # probe keys per partition
_POLL_S = 0.05
_NO_STANDBY = {"STATEFED_STANDBY_REPLICAS": "0"}


@dataclass(frozen=True)
class Failover:
    case: str
    nodes: int
    killed: str
    partitions: list[int]
    seconds: float
    polls: int
    failed_polls: int
    codes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "case"}


def answerable(
    session: BenchSession, keys: list[str], expected: list[int]
) -> tuple[bool, set[str]]:
    """Whether every probe key has its count via the gateway, and the error codes seen."""
    try:
        document = session.client.post(session.gateway_url, many_body(keys, session.dataset.view))
    except (httpx.HTTPError, ValueError) as exc:
        return False, {type(exc).__name__}
    codes = {str((e.get("extensions") or {}).get("code")) for e in document.get("errors") or []}
    rows = (document.get("data") or {}).get(session.dataset.view.many_field) or []
    return (not codes and [row and row["count"] for row in rows] == expected), codes


def standby_ready(session: BenchSession, partitions: list[int], victim: str) -> bool:
    """The gateway knows a live standby copy, off the victim, of each of `partitions`."""
    url = session.gateway_url.removesuffix("/graphql") + "/health"
    try:
        nodes = httpx.get(url, timeout=2.0).json().get("nodes", [])
    except (httpx.HTTPError, ValueError):
        return False
    held = {p for n in nodes if n["id"] != victim and n.get("alive") for p in n.get("standby", [])}
    return set(partitions) <= held


def _holds_standby(session: BenchSession) -> bool:
    return any((session.health(n) or {}).get("standby") for n in session.live)


def _kill_and_time(session: BenchSession, case: str) -> Failover:
    """SIGKILL the newest node; poll every partition through the gateway until all answer."""
    indexes = session.dataset.one_per_partition(_PER_PARTITION)
    keys = [session.dataset.key(i) for i in indexes]
    expected = [session.dataset.count(i) for i in indexes]
    if not answerable(session, keys, expected)[0]:
        raise BenchError(f"{case}: the probe keys are not answerable before the kill")
    victim, nodes = session.live[-1], len(session.live)
    lost = sorted(p for p, n in (session.owners() or {}).items() if n == victim)
    began = time.monotonic()
    session.kill_node(victim)
    deadline = began + session.timeout_s(session.settings.failover_timeout_s)
    polls, failed, codes = 0, 0, set[str]()
    while True:
        ok, seen = answerable(session, keys, expected)
        polls += 1
        if ok:
            break
        failed, codes = failed + 1, codes | seen
        if time.monotonic() > deadline:
            raise BenchError(f"{case}: partitions {lost} unanswerable long after killing {victim}")
        time.sleep(_POLL_S)
    seconds = time.monotonic() - began
    session.progress(
        f"failover {case}: every key answerable {seconds:.2f} s after killing {victim}"
    )
    session.settle()
    return Failover(case, nodes, victim, lost, seconds, polls, failed, sorted(codes))


def _with_standby(session: BenchSession) -> Failover:
    session.ensure_nodes(2)
    session.ensure_gateway()
    victim = session.live[-1]
    lost = sorted(p for p, n in (session.owners() or {}).items() if n == victim)
    wait_until(lambda: standby_ready(session, lost, victim), 60.0, "standby copies of " + str(lost))
    return _kill_and_time(session, "with standby")


def _without_standby(session: BenchSession) -> Failover:
    # a new node first, so a restarted one always has a peer to hand its partitions to
    restart = list(session.live)
    session.start_node(f"n{len(session.cluster.nodes) + 1}", **_NO_STANDBY)
    session.settle()
    for node_id in restart:
        session.restart_node(node_id, **_NO_STANDBY)
    wait_until(lambda: not _holds_standby(session), 30.0, "standby copies to be dropped")
    return _kill_and_time(session, "without standby")


def _write(section: Section, runs: list[Failover]) -> None:
    table = section.table("case", "nodes", "killed (partitions)", "every key answerable after")
    for run in runs:
        killed = f"{run.killed} ({', '.join(map(str, run.partitions))})"
        table.add(run.case, run.nodes, killed, f"**{run.seconds:.2f} s**")
        key = run.case.replace(" ", "_") + "_seconds"
        section.figures[key] = round(run.seconds, 3)
        section.figures[run.case.replace(" ", "_")] = run.to_json()
    codes = sorted({c for run in runs for c in run.codes})
    section.notes.append(
        f"{_PER_PARTITION} probe keys per partition polled through the gateway every "
        f"{_POLL_S * 1000:.0f} ms from the SIGKILL until all had their counts; error codes "
        f"seen meanwhile: {', '.join(codes) or 'none'}. With standby: nodes at their default "
        f"(one standby copy per partition), the gateway with {GATEWAY_ENV} (its default is "
        "1,000 records; the load before this step can leave standbys further behind). "
        "Without standby: a node added and every other one restarted "
        "with STATEFED_STANDBY_REPLICAS=0; a survivor then takes the lost partitions over after "
        "the consumer group's session timeout (6 s) and restores them from the changelog "
        "(or resumes its store, if it held them before)."
    )


def measure(session: BenchSession, report: Report) -> None:
    """Failover with standby replicas, then without."""
    section = report.section(NAME, TITLE)
    runs: list[Failover] = []
    try:
        runs.append(_with_standby(session))
        runs.append(_without_standby(session))
    finally:
        _write(section, runs)
