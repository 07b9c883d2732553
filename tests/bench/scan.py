"""Scan: the whole data set through the gateway in pages of 1,000 (keys/s, the gateway's peak
RSS meanwhile), and the latency of page 1 vs a deep page read from its cursor."""

from __future__ import annotations

import statistics
import time
from typing import Any

import orjson

from tests.bench.report import Report, fmt_bytes, fmt_ms, fmt_num, fmt_ratio
from tests.bench.rss import RssSampler
from tests.bench.session import BenchError, BenchSession

__all__ = ["DEEP_PAGE", "NAME", "PAGE", "deep_page", "measure"]

NAME = "scan"
TITLE = "Scan: a whole view through the gateway in pages of 1,000; page 1 vs a deep page"
PAGE = 1000
DEEP_PAGE = 500  # its latency is compared with page 1's (the middle page of a smaller set)
REPEATS = 25  # requests of page 1 and of the deep page each, alternating
NODES = 2


def _body(session: BenchSession, after: str | None) -> bytes:
    view = session.dataset.view
    query = (
        f"query($n: Int!, $a: String) {{ {view.scan_field}(first: $n, after: $a) {{ "
        f"edges {{ node {{ {view.key_field} count }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
    )
    return orjson.dumps({"query": query, "variables": {"n": PAGE, "a": after}})


def _page(session: BenchSession, after: str | None) -> tuple[list[str], dict[str, Any]]:
    """The keys of one page and its pageInfo; BenchError on a GraphQL error."""
    document = session.client.post(session.gateway_url, _body(session, after))
    if document.get("errors") or not document.get("data"):
        raise BenchError(f"scan page after {after!r} failed: {document.get('errors')}")
    view = session.dataset.view
    connection = document["data"][view.scan_field]
    keys = [edge["node"][view.key_field] for edge in connection["edges"]]
    return keys, connection["pageInfo"]


def deep_page(keys: int) -> int:
    """The page compared with page 1: DEEP_PAGE, or the middle one of a smaller data set."""
    return max(2, min(DEEP_PAGE, keys // PAGE // 2))


def _full_scan(session: BenchSession) -> tuple[int, float, str]:
    """Page through the whole view, checking the key order and that every key comes once;
    (keys, seconds, the cursor that starts the deep page)."""
    seen, last = 0, b""
    deep_number = deep_page(session.dataset.size)
    deep: str | None = None
    cursor: str | None = None
    began = time.perf_counter()
    for number in range(1, session.dataset.size // PAGE + 2):
        if number == deep_number:
            deep = cursor
        keys, info = _page(session, cursor)
        encoded = [key.encode("utf-8") for key in keys]
        if encoded != sorted(encoded) or (encoded and encoded[0] <= last):
            raise BenchError(f"page {number} of the scan is out of key order")
        seen += len(keys)
        last = encoded[-1] if encoded else last
        if not info["hasNextPage"]:
            break
        cursor = info["endCursor"]
    else:
        raise BenchError(f"the scan had more pages than {session.dataset.size:,} keys make")
    seconds = time.perf_counter() - began
    if seen != session.dataset.size:
        raise BenchError(f"the scan read {seen:,} keys, the data set has {session.dataset.size:,}")
    if deep is None:
        raise BenchError(f"the scan ended after {seen:,} keys, before page {deep_number}")
    return seen, seconds, deep


def _p50s(session: BenchSession, deep: str) -> tuple[float, float]:
    """p50 ms of page 1 and of the deep page, requested in turn (so load drifts hit both)."""
    first: list[float] = []
    deeper: list[float] = []
    for _ in range(REPEATS):
        for cursor, times in ((None, first), (deep, deeper)):
            began = time.perf_counter()
            keys, _ = _page(session, cursor)
            times.append((time.perf_counter() - began) * 1000)
            if len(keys) != PAGE:
                raise BenchError(f"a page held {len(keys)} keys, not {PAGE}")
    return statistics.median(first), statistics.median(deeper)


def measure(session: BenchSession, report: Report) -> None:
    """Scan the data set once (sampling the gateway's RSS), then time page 1 and the deep page."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(NODES)
    session.ensure_gateway()
    gateway = session.cluster.gateway
    if gateway is None or gateway.pid is None:
        raise BenchError("the gateway is not running")
    pid = gateway.pid
    session.quiet()
    _page(session, None)  # warm-up: the document cache, connections to the nodes
    sampler = RssSampler(lambda: {"gateway": pid}, interval_s=0.2)
    sampler.sample()
    before = sampler.peaks()["gateway"]["total"]["rss"]
    number = deep_page(session.dataset.size)
    with sampler:
        keys, seconds, deep = _full_scan(session)
    peak = sampler.peaks()["gateway"]["total"]["rss"]
    first_p50, deep_p50 = _p50s(session, deep)
    ratio = deep_p50 / first_p50
    section.figures.update(
        keys=keys,
        complete=True,
        page_size=PAGE,
        nodes=NODES,
        partitions=session.settings.partitions,
        seconds=round(seconds, 2),
        keys_per_s=round(keys / seconds),
        gateway_rss_before_bytes=before,
        gateway_peak_rss_bytes=peak,
        page1_p50_ms=round(first_p50, 2),
        deep_page=number,
        deep_p50_ms=round(deep_p50, 2),
        deep_over_first_p50=round(ratio, 2),
    )
    table = section.table("what", "figure")
    table.add(f"full scan: {fmt_num(keys)} keys, pages of {PAGE:,}", f"{seconds:.1f} s")
    table.add("**scan rate**", f"**{fmt_num(keys / seconds)} keys/s**")
    table.add("gateway RSS before the scan", fmt_bytes(before))
    table.add("**gateway peak RSS during the scan**", f"**{fmt_bytes(peak)}**")
    table.add("page 1 p50", fmt_ms(first_p50))
    table.add(f"page {number} p50 (from its cursor)", fmt_ms(deep_p50))
    table.add(f"**page {number} p50 / page 1 p50**", f"**{fmt_ratio(ratio)}**")
    section.notes.append(
        f"{session.settings.partitions} partitions over {NODES} nodes, restored from changelog "
        "records; one client, one request at a time, each page asking every partition for "
        f"{PAGE + 1} rows from its own position. Page 1 and page {number} are then asked "
        f"{REPEATS} times each, in turn; the target is that a deep page costs the same as the "
        "first (p50 within 1.5x). RSS of the gateway process sampled every 0.2 s. The scan "
        "reads every key, checking that pages come in key order and add up to the data set."
    )
    session.progress(
        f"scan: {keys / seconds:,.0f} keys/s, gateway peak {peak / (1 << 20):.0f} MiB, "
        f"page 1 p50 {first_p50:.1f} ms, page {number} p50 {deep_p50:.1f} ms"
    )
