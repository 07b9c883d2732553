"""`statefed produce` on the real broker: records land where Kafka's partitioner puts them
and each key's consistency token names its newest write."""

from __future__ import annotations

import io
import re
import sys

import pytest

from runtime.topics import ensure_topics
from schema import partition_for
from tooling.broker import KafkaBroker
from tooling.cli import main


def test_produce_prints_each_keys_newest_token(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "cli-produce-words"
    ensure_topics(broker.bootstrap, {topic: 4})
    monkeypatch.setattr(sys, "stdin", io.StringIO("kafka franz kafka\n"))
    main(["produce", "--topic", topic, "--bootstrap", broker.bootstrap])
    out = capsys.readouterr().out
    assert f"produced 3 records to {topic}" in out
    tokens = dict(re.findall(r"  (\w+): atLeast token (\S+)", out))
    assert set(tokens) == {"kafka", "franz"}
    offsets = {}
    for key, token in tokens.items():
        name, partition, offset = token.split(":")
        assert (name, int(partition)) == (topic, partition_for(key, 4))
        offsets[key] = int(offset)
    # a fresh topic: kafka was written twice, franz once (after kafka's first, if together)
    same = partition_for("kafka", 4) == partition_for("franz", 4)
    assert offsets == {"kafka": 2 if same else 1, "franz": 1 if same else 0}
    monkeypatch.setattr(sys, "stdin", io.StringIO("flink\n"))
    main(["produce", "--topic", topic, "--bootstrap", broker.bootstrap])
    assert f"produced 1 record to {topic} " in capsys.readouterr().out


def test_produce_to_a_topic_the_cluster_lacks_names_it_and_produces_nothing(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("kafka\n"))
    with pytest.raises(SystemExit) as refused:
        main(["produce", "--topic", "cli-produce-absent", "--bootstrap", broker.bootstrap])
    message = str(refused.value.code)
    assert message.startswith("statefed produce: topic cli-produce-absent has no partitions on ")
    assert "statefed topics" in message and message.endswith("; nothing was produced")
