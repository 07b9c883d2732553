"""Memory: peak RSS of every part over the run, and LevelDB bytes on disk per million keys."""

from __future__ import annotations

from tests.bench.report import Report, fmt_bytes, fmt_num
from tests.bench.session import BenchSession

__all__ = ["NAME", "measure"]

NAME = "memory"
TITLE = "Memory: peak RSS per process tree, LevelDB bytes per million keys"
_COMPONENTS = {
    "main": "Python process",
    "jvm": "Spark driver JVM",
    "python workers": "Spark Python workers",
    "other": "other children",
    "total": "whole tree",
}


def _rss_table(session: BenchSession, report: Report) -> None:
    section = report.section(NAME, TITLE)
    session.rss.sample()
    peaks = session.rss.peaks()
    table = section.table("part", "process", "processes (peak)", "peak RSS", "peak PSS")
    for part in sorted(peaks):
        components = peaks[part]
        for component, label in _COMPONENTS.items():
            if component not in components or (component == "total" and len(components) == 2):
                continue  # a one-process tree: its total is its main process
            f = components[component]
            table.add(part, label, f["processes"], fmt_bytes(f["rss"]), fmt_bytes(f["pss"]))
    section.figures["peak_memory_bytes"] = peaks


def measure(session: BenchSession, report: Report) -> None:
    """Report the sampler's peaks so far and the restored store's size."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(1)
    _rss_table(session, report)
    restore = session.restore
    if restore is not None:
        per_million = restore.store_bytes * 1_000_000 / restore.records
        section.figures["leveldb_bytes_per_million_keys"] = round(per_million)
        disk = section.table("LevelDB on disk", "figure")
        disk.add(
            f"{fmt_num(restore.records)} keys, all partitions, right after restore",
            fmt_bytes(restore.store_bytes),
        )
        disk.add("**per million keys**", f"**{fmt_bytes(per_million)}**")
    section.notes.append(
        "Sampled every 0.5 s with psutil over each part's process tree (the pipeline's Python "
        "driver, the JVM it starts and the JVM's Python workers are one tree) over the whole "
        "run up to this step; each figure is the peak of the sum over that component's "
        "processes. RSS counts pages shared by forked workers once per process, PSS splits "
        "them. On disk: rows, the top-N index (the row again plus the key) and offsets, "
        "including the not yet compacted LevelDB log."
    )
