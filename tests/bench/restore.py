"""Restore: records/s a fresh node materializes from a changelog into LevelDB stores."""

from __future__ import annotations

from tests.bench.report import Report, fmt_bytes, fmt_num
from tests.bench.session import RESTORE_POLL_S, BenchSession

__all__ = ["NAME", "measure"]

NAME = "restore"
TITLE = "Restore: changelog -> fresh LevelDB partition stores"


def measure(session: BenchSession, report: Report) -> None:
    """Time the first node's start on a changelog holding the whole data set."""
    section = report.section(NAME, TITLE)
    if session.live and session.restore is None:
        section.errors.append("restore needs a fresh cluster: run it before other steps")
        return
    session.ensure_nodes(1)
    timing = session.restore
    assert timing is not None
    rate = timing.records / timing.restore_s
    wall = timing.join_s + timing.restore_s
    section.figures.update(
        records=timing.records,
        partitions=session.settings.partitions,
        produce_seconds=round(timing.produce_s, 2),
        produce_records_per_s=round(timing.records / timing.produce_s),
        join_seconds=round(timing.join_s, 2),
        restore_seconds=round(timing.restore_s, 2),
        records_per_s=round(rate),
        records_per_s_from_process_start=round(timing.records / wall),
        store_bytes=timing.store_bytes,
    )
    table = section.table("what", "figure")
    table.add("changelog records (one per key)", fmt_num(timing.records))
    table.add("producing them to the changelog", f"{timing.produce_s:.1f} s")
    table.add("node start -> partitions assigned (start-up, group join)", f"{timing.join_s:.1f} s")
    table.add("assigned -> all applied, RUNNING", f"{timing.restore_s:.1f} s")
    table.add("**restore rate** (from assignment)", f"**{fmt_num(rate)} records/s**")
    table.add("rate from process start", f"{fmt_num(timing.records / wall)} records/s")
    table.add("LevelDB on disk after restore", fmt_bytes(timing.store_bytes))
    section.notes.append(
        "One node, all partitions, a fresh state directory; progress read from the node's "
        f"`/health` every {RESTORE_POLL_S * 1000:.0f} ms (applied offsets). The group "
        "join is in the join time, not in the rate."
    )
