"""The order of the PARTITION_UNAVAILABLE errors of an answer (gateway.api.responses)."""

from __future__ import annotations

from gateway.api.request import MissingPartition
from gateway.api.responses import in_answer_order
from gateway.model.errors import NodeUnavailableError


def _missing(*path: str | int, partition: int = 0) -> MissingPartition:
    error = NodeUnavailableError("word_counts", "refused", partitions=[partition], node="n1")
    return MissingPartition(tuple(path), partition, error)


def _places(missing: list[MissingPartition]) -> list[tuple[tuple[str | int, ...], int]]:
    return [(m.path, m.partition) for m in missing]


def test_by_the_fields_place_in_the_answer_then_by_partition() -> None:
    recorded = [_missing("b", partition=2), _missing("a", partition=5), _missing("b", partition=1)]
    ordered = in_answer_order(recorded, {"b": None, "a": None})
    assert _places(ordered) == [(("b",), 1), (("b",), 2), (("a",), 5)]


def test_list_items_by_their_index_and_roots_not_in_the_answer_last() -> None:
    recorded = [
        _missing("gone", partition=0),
        _missing("e", 10, partition=1),
        _missing("e", 2, partition=3),
    ]
    ordered = in_answer_order(recorded, {"e": []})
    assert _places(ordered) == [(("e", 2), 3), (("e", 10), 1), (("gone",), 0)]


def test_without_data_by_path() -> None:
    recorded = [_missing("y", partition=0), _missing("x", partition=4)]
    assert _places(in_answer_order(recorded, None)) == [(("x",), 4), (("y",), 0)]
