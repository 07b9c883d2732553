"""The store's key builders are the packed tuples the layout documents, byte for byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from node.storage import layout
from schema import MAX_UINT, pack

views = st.sampled_from(["word_counts", "v\x00iew", "é"])
keys = st.text()
uints = st.integers(0, MAX_UINT)


@given(views, keys, uints, uints)
def test_keys_are_the_documented_tuples(view: str, key: str, start_ms: int, count: int) -> None:
    assert layout.count_key(view, key) == pack("row", view, key)
    assert layout.count_top_key(view, count, key) == pack("top", view, MAX_UINT - count, key)
    keys = layout.CountKeys(view)
    assert keys.row(key) == layout.count_key(view, key)
    assert keys.top(count, keys.row(key)) == layout.count_top_key(view, count, key)
    assert layout.window_key(view, key, start_ms) == pack("win", view, key, start_ms)
    assert layout.window_top_key(view, start_ms, count, key) == pack(
        "wtop", view, start_ms, MAX_UINT - count, key
    )
    assert layout.latest_key(view, key) == pack("latest", view, key)
    total_key = layout.window_total_key(view, start_ms, count)
    assert total_key == pack("wtotal", view, start_ms, count)
    assert layout.window_total_span(total_key, len(pack("wtotal", view))) == (start_ms, count)
    assert layout.count_keys(view, [key, "k"]) == [pack("row", view, k) for k in (key, "k")]
    assert layout.latest_keys(view, [key, "k"]) == [pack("latest", view, k) for k in (key, "k")]
    at = (start_ms, count, start_ms)
    assert layout.event_key(view, key, at) == pack("hist", view, key, *at)
