"""Aggregate views through the gateway: a key's results and the top-N by any numeric result,
merged from every node's partitions (value descending, then key), keys without that
result left out, and a `by` the view does not rank by refused before any node is asked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from schema import EventRow
from tests.gateway.fakes import (
    FULL,
    HOST_PAGES,
    Model,
    codes,
    fake_nodes,
    post_query,
    running_gateway,
)

P = 6
T0 = 1_700_000_000_000
HOSTS = [f"h{i:02d}.example" for i in range(40)]


def aggregates() -> Model:
    """Each host's row: `views` and `pages` with many ties, and a few hosts without
    `pages` (no event had a path)."""
    truth = Model()
    for i, host in enumerate(HOSTS):
        pages = None if i % 9 == 4 else (i * 7) % 5
        fields = {"views": (i * 13) % 11, "pages": pages}
        truth.add_event(HOST_PAGES, EventRow(host, T0 + i, 0, i + 1, fields))
    return truth


def expected_top(truth: Model, by: str, limit: int) -> list[dict[str, Any]]:
    rows = [r for h in HOSTS if (r := truth.latest(HOST_PAGES, h)) and r.fields[by] is not None]
    rows.sort(key=lambda r: (-r.fields[by], r.key))
    return [{"host": r.key, by: r.fields[by]} for r in rows[:limit]]


TOP = "query($l: Int!, $b: HostPagesRanking!) { topHostsByPages(limit: $l, by: $b) { host %s } }"


@pytest.mark.parametrize("node_count", [1, 3])
@pytest.mark.parametrize(("by", "limit"), [("PAGES", 7), ("VIEWS", 12), ("PAGES", 100)])
def test_the_top_by_any_result_is_the_merged_order_of_every_partition(
    node_count: int, by: str, limit: int
) -> None:
    truth = aggregates()
    nodes = fake_nodes(truth, P, node_count, FULL)
    field = by.lower()

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return (await post_query(http, TOP % field, {"l": limit, "b": by}))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["topHostsByPages"] == expected_top(truth, field, limit)
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(P))


def test_the_first_result_is_the_default_ranking_and_lookups_show_every_result() -> None:
    truth = aggregates()
    nodes = fake_nodes(truth, P, 2, FULL)
    query = """{ topHostsByPages(limit: 3) { host views }
      hostPages(host: "h04.example") { host views pages eventTime }
      hostPagesMany(hosts: ["h01.example", "nowhere"]) { host pages } }"""

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return (await post_query(http, query))[1]

    data = asyncio.run(scenario())["data"]
    assert data["topHostsByPages"] == expected_top(truth, "views", 3)
    assert data["hostPages"] == {
        "host": "h04.example",
        "views": (4 * 13) % 11,
        "pages": None,
        "eventTime": "2023-11-14T22:13:20.004000+00:00",
    }
    assert data["hostPagesMany"] == [{"host": "h01.example", "pages": 7 % 5}, None]


def test_a_ranking_the_view_has_not_is_refused_before_any_node_is_asked() -> None:
    nodes = fake_nodes(aggregates(), P, 2, FULL)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return (await post_query(http, TOP % "views", {"l": 3, "b": "EVENT_TIME"}))[1]

    body = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"]
    assert "HostPagesRanking" in body["errors"][0]["message"]
    assert sum(n.requests for n in nodes) == 0
