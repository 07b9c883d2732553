"""`statefed produce` input: keys and JSON values from stdin and `--value`, and the refusal,
before anything is sent, of a record a view reading the topic would dead-letter."""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipeline.records import MAX_EVENT_MS as PIPELINES_MAX_EVENT_MS
from runtime.kafka import KAFKA_CLIENT_LOGGER
from schema import CATALOGUE, KeyType, ValueFormat
from tooling.cli import main
from tooling.produceinput import (
    MAX_EVENT_MS,
    KeyedValue,
    ProduceInputError,
    read_keys,
    records_for,
)

REPO = Path(__file__).resolve().parents[1]
NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
AHEAD_MS = 3_600_000  # STATEFED_PIPELINE_MAX_AHEAD_MS's default


def test_keys_take_the_shared_value_and_a_key_json_line_its_own() -> None:
    lines = ["kafka franz\n", 'c001={"trip": "ZRH-LIS", "note": "a=b"}\n', "\n", "kafka\n"]
    assert read_keys(lines, '{"trip": "GVA-OPO"}') == [
        KeyedValue("kafka", '{"trip": "GVA-OPO"}'),
        KeyedValue("franz", '{"trip": "GVA-OPO"}'),
        KeyedValue("c001", '{"trip": "ZRH-LIS", "note": "a=b"}'),
        KeyedValue("kafka", '{"trip": "GVA-OPO"}'),
    ]
    assert read_keys(["a b\n"]) == [KeyedValue("a"), KeyedValue("b")]


def test_a_line_whose_text_after_the_equals_sign_is_no_value_is_keys_holding_it() -> None:
    """A value is a JSON object, array or string; a URL's query or base64's padding is
    part of a key, not split off as a value."""
    lines = ["\ufeffurl?x=1 dGVzdA==\n", "a=true b=\n", 'c={"n": 1}\n']
    assert read_keys(lines) == [
        KeyedValue("url?x=1"),
        KeyedValue("dGVzdA=="),
        KeyedValue("a=true"),
        KeyedValue("b="),
        KeyedValue("c", '{"n": 1}'),
    ]


def test_the_command_refuses_no_keys_and_a_count_below_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    with pytest.raises(SystemExit) as refused:
        main(["produce", "--bootstrap", "127.0.0.1:9"])
    assert str(refused.value.code) == (
        "statefed produce: no keys on stdin: give keys separated by spaces or lines, or "
        "KEY=JSON lines, or --count N for generated words; nothing was produced"
    )
    assert "type keys" not in capsys.readouterr().err  # a pipe is not asked
    with pytest.raises(SystemExit) as usage:
        main(["produce", "--count", "0"])
    assert usage.value.code == 2
    assert "'0' is not a whole number of at least 1" in capsys.readouterr().err


def test_a_person_at_a_terminal_is_told_what_to_type() -> None:
    primary, terminal = pty.openpty()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "tooling.cli", "produce", "--bootstrap", "127.0.0.1:9"],
            cwd=REPO,
            stdin=terminal,
            stderr=subprocess.PIPE,
            text=True,
        ) as process:
            os.write(primary, b"\x04")  # Ctrl-D at once: no keys
            try:
                _, said = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
    finally:
        os.close(primary)
        os.close(terminal)
    asked, _, refused = said.partition("\n")
    assert asked.startswith("statefed produce: type keys, or KEY=JSON lines, then Ctrl-D")
    assert "no keys on stdin" in refused
    assert process.returncode == 1


@pytest.mark.parametrize(
    ("lines", "value", "names"),
    [
        (["kafka\n"], "{trip: 1}", "--value: '{trip: 1}' is not JSON"),
        (["kafka\n"], "ZRH-LIS", "a string value needs its quotes"),
        (["ok\n", "c001={nope\n"], None, "line 2, key 'c001': '{nope' is not JSON"),
        (["a b={}\n"], None, "line 1: 'a b={}' is neither keys nor KEY=JSON"),
        (["={}\n"], None, "line 1: '={}' is neither keys nor KEY=JSON"),
    ],
)
def test_input_that_is_no_json_is_refused_naming_where(
    lines: list[str], value: str | None, names: str
) -> None:
    with pytest.raises(ProduceInputError, match=names.replace("{", r"\{").replace("(", r"\(")):
        read_keys(lines, value)


def test_a_topic_whose_views_ignore_the_value_takes_any_value_or_none() -> None:
    keyed = [KeyedValue("kafka"), KeyedValue("franz", '"text"'), KeyedValue("x", "[1]")]
    records = records_for("words", CATALOGUE, keyed, NOW_MS, AHEAD_MS)
    assert [(r.key, r.value) for r in records] == [
        ("kafka", b""),
        ("franz", b'"text"'),
        ("x", b"[1]"),
    ]


def test_a_topic_no_view_reads_takes_any_value() -> None:
    (record,) = records_for("elsewhere", CATALOGUE, [KeyedValue("k", "3")], NOW_MS, AHEAD_MS)
    assert record.value == b"3"


def test_a_json_object_gets_the_views_event_time_when_it_has_none() -> None:
    keyed = [
        KeyedValue("c001", '{"trip": "ZRH-LIS"}'),
        KeyedValue("c002", '{"trip": "GVA-OPO", "timestamp": 1767225000000}'),
        KeyedValue("c003", '{"timestamp": 1767225000000.0}'),  # whole ms as a JSON float
    ]
    records = records_for("bookings", CATALOGUE, keyed, NOW_MS, AHEAD_MS)
    assert [orjson.loads(r.value or b"") for r in records] == [
        {"trip": "ZRH-LIS", "timestamp": NOW_MS},
        {"trip": "GVA-OPO", "timestamp": 1767225000000},
        {"timestamp": 1767225000000.0},
    ]


@pytest.mark.parametrize(
    ("topic", "value", "says"),
    [
        ("bookings", None, "key 'c001' has no value, but views last_booking, booking_history"),
        ("bookings", '"ZRH-LIS"', "key 'c001' has the value \"ZRH-LIS\", but views"),
        ("bookings", "[1, 2]", "has the value [1, 2], but"),
        ("bookings", "null", "has the value null, but"),
        ("pageviews", None, "views host_access, host_access_per_minute, host_pages read it as"),
    ],
)
def test_a_topic_whose_views_read_the_value_refuses_what_is_no_object(
    topic: str, value: str | None, says: str
) -> None:
    with pytest.raises(ProduceInputError) as refused:
        records_for(topic, CATALOGUE, [KeyedValue("c001", value)], NOW_MS, AHEAD_MS)
    message = str(refused.value)
    assert message.startswith(f"topic {topic}: ") and says in message
    assert "event time 'timestamp' in ms since the epoch, now when left out)" in message
    field = "trip" if topic == "bookings" else "path"  # what fits, to copy
    assert f"""--value '{{"{field}": "text"}}' or a line KEY={{"{field}": "text"}}""" in message


def test_an_event_time_past_the_pipelines_bound_is_refused_before_anything_is_written() -> None:
    """The record's Kafka timestamp is about now: the pipeline would dead-letter it."""
    on_the_bound = f'{{"path": "/", "timestamp": {NOW_MS + AHEAD_MS}}}'
    (record,) = records_for(
        "pageviews", CATALOGUE, [KeyedValue("a.org", on_the_bound)], NOW_MS, AHEAD_MS
    )
    assert record.key == "a.org"
    past_it = f'{{"path": "/", "timestamp": {NOW_MS + AHEAD_MS + 1}}}'
    with pytest.raises(ProduceInputError) as refused:
        records_for("pageviews", CATALOGUE, [KeyedValue("a.org", past_it)], NOW_MS, AHEAD_MS)
    assert str(refused.value) == (
        f"topic pageviews: key 'a.org' has event time 'timestamp' = {NOW_MS + AHEAD_MS + 1}, "
        f"more than {AHEAD_MS} ms after now ({NOW_MS}): the pipeline would make it a dead "
        f"letter, as it would move view host_access's watermark past every event to come (the "
        f"bound is STATEFED_PIPELINE_MAX_AHEAD_MS)"
    )


@pytest.mark.parametrize(
    "moment", ['"2026-01-01"', "null", "true", "-1", "1.5", str(MAX_EVENT_MS), "{}"]
)
def test_an_event_time_the_pipeline_cannot_place_is_refused(moment: str) -> None:
    value = f'{{"path": "/", "timestamp": {moment}}}'
    with pytest.raises(ProduceInputError) as refused:
        records_for("pageviews", CATALOGUE, [KeyedValue("graphql.org", value)], NOW_MS, AHEAD_MS)
    assert str(refused.value) == (
        f"topic pageviews: key 'graphql.org' has event time 'timestamp' = {moment}, but view "
        f"host_access needs a number of whole ms since the epoch, 0 to {MAX_EVENT_MS - 1} "
        "(leave it out for now)"
    )


def test_the_latest_event_time_is_the_pipelines() -> None:
    assert MAX_EVENT_MS == PIPELINES_MAX_EVENT_MS


def test_the_command_refuses_before_producing_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('c001={"trip": "ZRH-LIS"}\nc002\n'))
    # nothing listens at this bootstrap: a record sent would fail, not report success
    args = ["produce", "--topic", "bookings", "--bootstrap", "127.0.0.1:9"]
    with pytest.raises(SystemExit) as refused:
        main(args)
    assert str(refused.value.code).startswith(
        "statefed produce: topic bookings: key 'c002' has no value, but views last_booking, "
        "booking_history read it as a JSON object"
    )
    assert str(refused.value.code).endswith("; nothing was produced")


def test_the_command_names_the_settings_when_no_kafka_answers(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("kafka\n"))
    monkeypatch.setattr(logging.getLogger(KAFKA_CLIENT_LOGGER), "propagate", True)
    with pytest.raises(SystemExit) as refused:  # nothing listens at this bootstrap
        main(["produce", "--bootstrap", "127.0.0.1:9"])
    message = str(refused.value.code)
    assert message.startswith("statefed produce: no metadata from Kafka at 127.0.0.1:9 ")
    assert "STATEFED_BOOTSTRAP" in message and message.endswith("; nothing was produced")
    # one message, not the Kafka client's line per reconnect (about one every 100 ms)
    assert "rdkafka" not in capfd.readouterr().err


def test_the_command_says_values_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["produce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--value JSON JSON value of every key (a stdin line KEY=JSON, a JSON object," in text


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"key_type": KeyType.LONG}, "reads long keys, and this command writes string keys"),
        ({"value_format": ValueFormat.AVRO}, "reads avro values of subject bookings-value"),
    ],
)
def test_a_topic_read_as_other_keys_or_values_is_refused_before_producing(
    change: dict[str, Any], said: str
) -> None:
    views = [dataclasses.replace(v, **change) if v.topic == "bookings" else v for v in CATALOGUE]
    with pytest.raises(ProduceInputError, match=said):
        records_for("bookings", views, [KeyedValue("c001", '{"trip": "x"}')], NOW_MS, AHEAD_MS)


def test_a_key_in_another_encoding_is_refused_naming_its_bytes_before_producing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what a UTF-8 reader of stdin makes of Latin-1 input: the byte as a lone surrogate
    latin1 = b"kafka caf\xe9\n".decode("utf-8", "surrogateescape")
    monkeypatch.setattr(sys, "stdin", io.StringIO(latin1))
    with pytest.raises(SystemExit) as refused:  # nothing listens there: nothing is sent
        main(["produce", "--bootstrap", "127.0.0.1:9"])
    message = str(refused.value.code)
    assert message.startswith(
        "statefed produce: topic words: key b'caf\\xe9' is not UTF-8 text, and keys are "
    )
    assert "iconv" in message and message.endswith("; nothing was produced")


def test_a_record_over_the_producers_limit_is_refused_naming_the_setting_before_producing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('small\nbig={"v": "' + "x" * 2_000 + '"}\n'))
    monkeypatch.setenv("STATEFED_KAFKA_MESSAGE_MAX_BYTES", "1500")
    with pytest.raises(SystemExit) as refused:
        main(["produce", "--topic", "elsewhere", "--bootstrap", "127.0.0.1:9"])
    message = str(refused.value.code)
    assert message.startswith(
        "statefed produce: topic elsewhere: key 'big' makes a record of 2,012 bytes, over the "
        "1,500 the producer sends (message.max.bytes)"
    )
    assert "STATEFED_KAFKA_MESSAGE_MAX_BYTES" in message
    assert message.endswith("; nothing was produced")
    records = records_for(
        "elsewhere", CATALOGUE, [KeyedValue("k", '"' + "x" * 1_497 + '"')], NOW_MS, AHEAD_MS, 1_500
    )
    assert len(records[0].value or b"") == 1_499  # 1,500 bytes with its key: at the limit, taken
