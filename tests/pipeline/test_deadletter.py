"""The dead-letter record format."""

from __future__ import annotations

import orjson
import pytest

from pipeline.deadletter import (
    KEPT_BYTES,
    KEPT_REASON_CHARS,
    DeadLetter,
    bounded,
    decode_dead_letter,
    encode_dead_letter,
)
from pipeline.errors import RecordTooLargeError
from pipeline.sink import BatchProducer
from schema import DEADLETTER_TOPIC
from tooling.broker import free_port


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


def test_a_dead_letter_of_a_large_record_keeps_a_prefix_and_says_so() -> None:
    key, value = b"k" * 2_000_000, bytes(range(256)) * 8_000  # 2 MB each
    letter = DeadLetter("r" * 10_000, "words", 1, 2, None, key, value)
    encoded = encode_dead_letter(letter)
    # what the producer counts against its message.max.bytes: the value and the key
    assert len(encoded) + len(bounded(letter).key or b"") < 400_000
    back = decode_dead_letter(encoded)
    assert (back.key, back.value) == (key[:KEPT_BYTES], value[:KEPT_BYTES])
    assert (back.key_size, back.value_size, back.truncated) == (2_000_000, 2_048_000, True)
    assert len(back.reason) == KEPT_REASON_CHARS
    assert back.reason.startswith("r" * 1_000)
    doc = orjson.loads(encoded)
    assert (doc["key_size"], doc["value_size"], doc["truncated"]) == (2_000_000, 2_048_000, True)


def test_a_small_record_is_kept_whole_with_its_sizes() -> None:
    doc = orjson.loads(encode_dead_letter(DeadLetter("x", "words", 0, 0, None, None, b"v")))
    assert (doc["key_size"], doc["value_size"], doc["truncated"]) == (None, 1, False)


def test_a_dead_letter_written_before_sizes_reads_as_whole() -> None:
    old = b'{"reason":"x","topic":"t","partition":0,"offset":1,"timestamp_ms":null,'
    old += b'"key_base64":"aw==","value_base64":null}'
    assert decode_dead_letter(old) == DeadLetter("x", "t", 0, 1, None, b"k", None)


def test_the_producer_takes_a_dead_letter_of_a_record_it_could_not_take() -> None:
    # produce() checks the size at once: no broker needed
    producer = BatchProducer(f"127.0.0.1:{free_port()}", "test-dead-letter-size", timeout_s=1.0)
    try:
        value = b"v" * 990_000  # a record the producer takes, a dead letter of it not before
        letter = bounded(DeadLetter("x", "words", 0, 0, None, b"k", value))
        producer.send(DEADLETTER_TOPIC, letter.key, encode_dead_letter(letter))
        with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes"):
            producer.send(DEADLETTER_TOPIC, b"k", b"v" * 1_000_000)
    finally:
        producer.close()
