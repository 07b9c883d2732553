"""Writing a run to RESULTS.md (for people) and RESULTS.json (for tools and the next run).

Each run keeps the headline figures of the runs before it (from the previous JSON), so
RESULTS.md shows before/after across changes, and carries over the hand-written section
"Optimizations (before/after)" of the previous RESULTS.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.bench.machine import Machine
from tests.bench.report import Report, Table, fmt_num
from tests.bench.targets import TargetResult

__all__ = ["RunInfo", "headline", "kept_section", "write_results"]

_HISTORY = 20
# a hand-written section of RESULTS.md that each run carries over from the previous file
_KEPT_HEADING = "## Optimizations (before/after)"
# (label, section, path) of the figures compared across runs
_HEADLINE: list[tuple[str, str, tuple[str, ...]]] = [
    ("floor req/s c32", "point", ("runs", "floor_c32", "rps")),
    ("node req/s c32", "point", ("runs", "node_c32", "rps")),
    ("gateway req/s c32", "point", ("runs", "gateway_c32", "rps")),
    ("gateway p99 c32 ms", "point", ("runs", "gateway_c32", "p99_ms")),
    ("gateway p50 c1 ms", "point", ("runs", "gateway_c1", "p50_ms")),
    ("top10 3 nodes p50 ms", "fanout", ("nodes_3", "top10", "p50_ms")),
    ("freshness p50 ms", "freshness", ("steady", "latency_ms", "p50")),
    ("freshness p99 ms", "freshness", ("steady", "latency_ms", "p99")),
    (
        "freshness p50 10k/s ms",
        "freshness",
        ("modes", "real_time", "rate_10000", "latency_ms", "p50"),
    ),
    (
        "freshness p99 10k/s ms",
        "freshness",
        ("modes", "real_time", "rate_10000", "latency_ms", "p99"),
    ),
    (
        "freshness micro-batch p50 ms",
        "freshness",
        ("modes", "micro_batch", "rate_1000", "latency_ms", "p50"),
    ),
    (
        "freshness micro-batch p99 ms",
        "freshness",
        ("modes", "micro_batch", "rate_1000", "latency_ms", "p99"),
    ),
    ("pipeline events/s", "throughput", ("events_per_s",)),
    ("restore records/s", "restore", ("records_per_s",)),
    ("failover standby s", "failover", ("with_standby_seconds",)),
    ("failover no standby s", "failover", ("without_standby_seconds",)),
    ("sigstop answerable s", "freeze", ("answerable_seconds",)),
    ("sigstop p99 ms", "freeze", ("p99_ms",)),
    ("sigstop p99 first 6 s ms", "freeze", ("before_session_timeout", "p99_ms")),
    ("cache hits x floor c32", "cache", ("ratios", "hits_over_floor_rps_c32")),
    ("cache off x floor c32", "cache", ("ratios", "off_over_floor_rps_c32")),
    ("push p50 1k/s ms", "live", ("runs", "rate_1000", "latency_ms", "p50")),
    ("push p99 1k/s ms", "live", ("runs", "rate_1000", "latency_ms", "p99")),
    ("push p50 10k/s ms", "live", ("runs", "rate_10000", "latency_ms", "p50")),
    ("push p99 10k/s ms", "live", ("runs", "rate_10000", "latency_ms", "p99")),
    ("gateway MiB per 1k subs", "live", ("memory", "gateway_per_1000_mib")),
    ("scan keys/s", "scan", ("keys_per_s",)),
    ("scan deep/page-1 p50", "scan", ("deep_over_first_p50",)),
    (
        "peers gw x faster vars c32",
        "peers",
        ("ratios", "gateway_cache_off_rps_over_faster_peer_variables_c32"),
    ),
    (
        "peers gw x faster literals c32",
        "peers",
        ("ratios", "gateway_cache_off_rps_over_faster_peer_literals_c32"),
    ),
    (
        "gateway literals x vars c32",
        "peers",
        ("ratios", "literals_over_variables_gateway_cache_off_c32"),
    ),
    ("node literals x vars c32", "peers", ("ratios", "literals_over_variables_node_c32")),
    (
        "gateway cpu ms/req vars c32",
        "peers",
        ("cells", "gateway_cache_off_variables_c32", "front_cpu_ms_per_request"),
    ),
]


@dataclass(frozen=True)
class RunInfo:
    machine: Machine
    load_generator: str
    seconds: float
    settings: dict[str, Any]
    command: str
    other_cores: float  # average cores other processes used during the run


def headline(report: Report) -> dict[str, Any]:
    return {label: report.figure(section, *path) for label, section, path in _HEADLINE}


def _previous(json_path: Path) -> list[dict[str, Any]]:
    """The history of earlier runs, this file's own run included."""
    try:
        old = orjson.loads(json_path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    if not isinstance(old, dict) or "headline" not in old:
        return []
    entry = {"date": old["machine"]["date"], "commit": old["machine"]["commit"], **old["headline"]}
    history: list[dict[str, Any]] = [*old.get("history", []), entry]
    return history[-_HISTORY:]


def _decimals(label: str) -> bool:
    return "ms" in label or label.endswith(" s") or " x " in label or "MiB" in label


def _history_table(history: list[dict[str, Any]], current: dict[str, Any]) -> Table:
    labels = [label for label, _, _ in _HEADLINE]
    table = Table(["run", "commit", *labels])
    rows = [*history, {"date": "this run", "commit": current["commit"], **current["figures"]}]
    for row in rows:
        cells = [fmt_num(row.get(label), 2 if _decimals(label) else 0) for label in labels]
        table.add(row["date"], str(row["commit"])[:12], *cells)
    return table


def _cpu_text(cpu: list[dict[str, float]]) -> str:
    if not cpu:
        return "CPU not measured"
    own = ", ".join(f"{c['own']:.2f}" for c in cpu)
    other = ", ".join(f"{c['other']:.2f}" for c in cpu)
    warn = (
        " (**the machine was busy with other work: figures are disturbed**)"
        if any(c["other"] > 0.25 for c in cpu)
        else ""
    )
    return f"cores used by this run: {own}; by other processes: {other}{warn}"


def _markdown(
    info: RunInfo, report: Report, targets: list[TargetResult], history: list[dict[str, Any]]
) -> str:
    m = info.machine
    lines = [
        "# statefed benchmark results",
        "",
        f"Written by `{info.command}` on {m.date} at commit `{m.commit}` in {info.seconds:.0f} s.",
        f"Machine: {m.cores} cores ({m.cpu_model}), {m.memory_bytes / (1 << 30):.1f} GiB memory, "
        f"Linux {m.kernel}, Python {m.python}. Load generator: {info.load_generator}. "
        "Every process runs on this machine and talks over 127.0.0.1; the machine is shared "
        "by all of them, so read figures as ratios within this run. Other processes on the "
        f"machine used {info.other_cores:.2f} cores on average during the run"
        + (" (**busy: figures are disturbed**)." if info.other_cores > 0.25 else "."),
        "",
        "## Targets (issues 6, 15, 16, 18, 30 and 31)",
        "",
    ]
    table = Table(["target", "measured", "result"])
    for t in targets:
        table.add(t.target, t.measured, f"**{t.status}**")
    lines += [table.markdown(), ""]
    for number, section in enumerate(report.sections.values(), start=1):
        lines += [f"## {number}. {section.title}", ""]
        for part in section.tables:
            lines += [part.markdown(), ""]
        lines += [f"- {note}" for note in section.notes]
        lines += [f"- **Error**: {error}" for error in section.errors]
        lines += [f"- Took {section.seconds:.0f} s; {_cpu_text(section.cpu)}.", ""]
    current = {"commit": m.commit, "figures": headline(report)}
    lines += [
        "## Before / after (headline figures of earlier runs)",
        "",
        _history_table(history, current).markdown(),
        "",
    ]
    return "\n".join(lines)


def kept_section(markdown: str) -> str:
    """The hand-written `_KEPT_HEADING` section of `markdown` (up to the next `## `
    heading), or "" when there is none."""
    start = markdown.find(_KEPT_HEADING)
    if start < 0 or (start > 0 and markdown[start - 1] != "\n"):
        return ""
    end = markdown.find("\n## ", start + len(_KEPT_HEADING))
    section = markdown[start:] if end < 0 else markdown[start : end + 1]
    return section.rstrip() + "\n"


def write_results(
    directory: Path, info: RunInfo, report: Report, targets: list[TargetResult]
) -> tuple[Path, Path]:
    """Write RESULTS.md and RESULTS.json into `directory`; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    md_path, json_path = directory / "RESULTS.md", directory / "RESULTS.json"
    history = _previous(json_path)
    document = {
        "machine": info.machine.to_json(),
        "load_generator": info.load_generator,
        "seconds": round(info.seconds, 1),
        "other_processes_cores": round(info.other_cores, 2),
        "command": info.command,
        "settings": info.settings,
        "targets": [t.to_json() for t in targets],
        "headline": headline(report),
        "sections": {name: s.to_json() for name, s in report.sections.items()},
        "history": history,
    }
    json_path.write_bytes(
        orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    )
    try:
        kept = kept_section(md_path.read_text())
    except OSError:
        kept = ""
    markdown = _markdown(info, report, targets, history)
    md_path.write_text(markdown + ("\n" + kept if kept else ""))
    return md_path, json_path
