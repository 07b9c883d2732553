"""A frozen node: SIGSTOP an ACTIVE node for 10 s (alive to the kernel and to membership for
3 heartbeats, silent to the gateway), then SIGCONT it. Measured: the time from the SIGSTOP
until every probe key is answerable, and the latency of the probes during the stop (the
gateway hedges a silent owner with a standby, then routes around it as suspect).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.bench.failover import answerable, standby_ready
from tests.bench.graphql import many_body
from tests.bench.report import Report, Section, fmt_ms
from tests.bench.session import GATEWAY_ENV, BenchError, BenchSession
from tests.bench.stats import percentile
from tooling.processes import wait_until

__all__ = ["NAME", "measure"]

NAME = "freeze"
TITLE = "Failover: SIGSTOP of an ACTIVE node (frozen, not dead) for 10 s"
STOP_S = 10.0
_PER_PARTITION = 5  # probe keys per partition, as for the SIGKILL case
_POLL_S = 0.05
# the nodes' consumer group session timeout: until then the frozen node keeps its
# partitions in the group, and only hedging and suspicion keep its reads answered
_SESSION_TIMEOUT_S = 6.0


@dataclass
class _Probes:
    """Every probe sent during the stop: when (seconds after the SIGSTOP), its latency,
    whether each key had its count."""

    sent_s: list[float]
    latencies_ms: list[float]
    answered: list[bool]
    standby_entries: int = 0  # freshness entries read from a STANDBY copy
    first_answerable_s: float | None = None
    # per probe that was not answerable: seconds after the SIGSTOP, and its errors' codes
    # and reasons
    failed: list[tuple[float, list[str]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)
        early = [
            ms
            for at, ms in zip(self.sent_s, self.latencies_ms, strict=True)
            if at < _SESSION_TIMEOUT_S
        ]
        return {
            "probes": len(ordered),
            "answerable_probes": sum(self.answered),
            "standby_entries": self.standby_entries,
            "p50_ms": _rounded(percentile(ordered, 50)),
            "p99_ms": _rounded(percentile(ordered, 99)),
            "max_ms": _rounded(max(ordered, default=math.nan)),
            "before_session_timeout": {
                "probes": len(early),
                "p99_ms": _rounded(percentile(early, 99)),
                "max_ms": _rounded(max(early, default=math.nan)),
            },
            "failed": [{"at_s": round(at, 2), "errors": errors} for at, errors in self.failed],
        }


def _probe(
    session: BenchSession, keys: list[str], expected: list[int], began: float, probes: _Probes
) -> None:
    """One probe of every key through the gateway, recorded in `probes`."""
    sent = time.monotonic()
    try:
        document = session.client.post(session.gateway_url, many_body(keys, session.dataset.view))
    except (httpx.HTTPError, ValueError) as exc:
        document = {"errors": [{"extensions": {"code": type(exc).__name__}}]}
    received = time.monotonic()
    probes.sent_s.append(sent - began)
    errors = document.get("errors") or []
    rows = (document.get("data") or {}).get(session.dataset.view.many_field) or []
    ok = not errors and [row and row["count"] for row in rows] == expected
    probes.latencies_ms.append((received - sent) * 1000)
    probes.answered.append(ok)
    if not ok:
        reasons = sorted({_described(e) for e in errors})
        probes.failed.append((sent - began, reasons or ["wrong or missing counts"]))
    freshness = (document.get("extensions") or {}).get("freshness") or []
    probes.standby_entries += sum(e.get("role") == "STANDBY" for e in freshness)
    if ok and probes.first_answerable_s is None:
        probes.first_answerable_s = received - began


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 2)


def _described(error: dict[str, Any]) -> str:
    extensions = error.get("extensions") or {}
    return f"{extensions.get('code')} {extensions.get('reason') or ''}".strip()


def _freeze(session: BenchSession) -> tuple[str, list[int], _Probes]:
    session.ensure_nodes(2)
    session.ensure_gateway()
    victim = session.live[-1]
    lost = sorted(p for p, n in (session.owners() or {}).items() if n == victim)
    wait_until(lambda: standby_ready(session, lost, victim), 60.0, f"standby copies of {lost}")
    indexes = session.dataset.one_per_partition(_PER_PARTITION)
    keys = [session.dataset.key(i) for i in indexes]
    expected = [session.dataset.count(i) for i in indexes]
    if not answerable(session, keys, expected)[0]:
        raise BenchError("the probe keys are not answerable before the SIGSTOP")
    process = session.cluster.nodes[victim]
    probes = _Probes([], [], [])
    began = time.monotonic()
    try:
        process.pause()
        while time.monotonic() - began < STOP_S:
            _probe(session, keys, expected, began, probes)
            time.sleep(_POLL_S)  # the probes' pace, as in the SIGKILL case
    finally:
        process.resume()
    session.progress(
        f"freeze: {sum(probes.answered)} of {len(probes.answered)} probes answerable while "
        f"{victim} was stopped; p99 {fmt_ms(probes.to_json()['p99_ms'])}"
    )
    session.settle()  # the resumed node takes its partitions back
    return victim, lost, probes


def _write(section: Section, victim: str, lost: list[int], probes: _Probes) -> None:
    figures = probes.to_json()
    failed = "; ".join(f"{at:.1f} s: {', '.join(errors)}" for at, errors in probes.failed)
    table = section.table(
        "stopped (partitions)",
        "every key answerable after",
        "probes answerable",
        "p50",
        "p99",
        "max",
        f"p99 (max) in the first {_SESSION_TIMEOUT_S:.0f} s",
    )
    first = probes.first_answerable_s
    early = figures["before_session_timeout"]
    table.add(
        f"{victim} ({', '.join(map(str, lost))})",
        "never" if first is None else f"**{first:.2f} s**",
        f"{figures['answerable_probes']} of {figures['probes']}",
        fmt_ms(figures["p50_ms"]),
        f"**{fmt_ms(figures['p99_ms'])}**",
        fmt_ms(figures["max_ms"]),
        f"**{fmt_ms(early['p99_ms'])}** ({fmt_ms(early['max_ms'])})",
    )
    section.figures.update(figures, answerable_seconds=first, stopped=victim, partitions=lost)
    section.notes.append(
        f"{_PER_PARTITION} probe keys per partition (every partition, so each probe reads the "
        f"stopped node's partitions) polled through the gateway every {_POLL_S * 1000:.0f} ms "
        f"for the {STOP_S:.0f} s the node was stopped (SIGSTOP, then SIGCONT); latency is per "
        f"probe, one connection. Freshness entries read from standbys: "
        f"{probes.standby_entries}. Probes not answerable (sent at, after the SIGSTOP): "
        f"{failed or 'none'}. "
        f"Nodes at their default (one standby copy per partition), the gateway with "
        f"{GATEWAY_ENV} and hedging at its defaults (STATEFED_GATEWAY_HEDGE_MIN_MS 20, "
        "_MAX_MS 500). The stopped node's heartbeats stop: after 2 intervals it is suspect, "
        "after 3 dead, and after the group's session timeout (6 s) its partitions move (the "
        "range assignor revokes every partition of every node meanwhile: probes then wait "
        "in the gateway's retry rounds); resumed, it rejoins and takes partitions back. In "
        f"the first {_SESSION_TIMEOUT_S:.0f} s only hedged reads and suspicion answer for it."
    )


def measure(session: BenchSession, report: Report) -> None:
    """SIGSTOP an ACTIVE node for 10 s under probes, then SIGCONT and settle."""
    section = report.section(NAME, TITLE)
    victim, lost, probes = _freeze(session)
    _write(section, victim, lost, probes)
