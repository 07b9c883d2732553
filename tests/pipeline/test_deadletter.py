"""The dead-letter record format."""

from __future__ import annotations

import pytest

from pipeline.deadletter import DeadLetter, decode_dead_letter, encode_dead_letter


@pytest.mark.parametrize(
    "letter",
    [
        DeadLetter("null key", "words", 3, 17, 1_700_000_000_000, None, b"v"),
        DeadLetter("key is not valid UTF-8", "words", 0, 0, None, b"\xff", None),
    ],
)
def test_dead_letters_round_trip(letter: DeadLetter) -> None:
    assert decode_dead_letter(encode_dead_letter(letter)) == letter


def test_undecodable_dead_letters_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="dead-letter"):
        decode_dead_letter(b'{"reason": "x"}')
