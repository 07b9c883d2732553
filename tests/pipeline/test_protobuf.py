"""Protobuf schemas as a registry holds them (.proto text, or a base64 descriptor as
Confluent's Python serializer registers it) and the decoder the pipeline's UDF runs: which
message the indexes name, and what it makes of bytes that do not decode (no Spark here)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, message_factory

from pipeline.errors import SourceError
from pipeline.protobuf import ProtobufSchemas, descriptor_pool_of, descriptor_set, json_of
from pipeline.shapes import mismatches
from pipeline.wire import Version
from schema import FieldType, ListOf, RecordOf, ValueField

TEXT = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  google.protobuf.Timestamp at = 2;
  repeated Line lines = 3;
  message Line { string sku = 1; int32 qty = 2; }
}
message Other { string x = 1; }
"""


def _classes(descriptors: bytes) -> dict[str, type]:
    pool = descriptor_pool_of(descriptors)
    names = ("shop.Order", "shop.Order.Line", "shop.Other")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


def _framed(schema_id: int, indexes: bytes, message: object) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + indexes + message.SerializeToString()  # type: ignore[attr-defined]


def test_a_text_schema_compiles_and_the_indexes_pick_the_message() -> None:
    descriptors = descriptor_set("orders-value", 7, TEXT)
    classes = _classes(descriptors)
    order = classes["shop.Order"](id=2**62, lines=[classes["shop.Order.Line"](sku="a", qty=3)])
    order.at.FromMilliseconds(1_767_225_600_123)
    decode = json_of({7: descriptors})
    assert json.loads(decode(_framed(7, b"\x00", order)) or "") == {
        "id": str(2**62),  # protobuf's JSON: 64-bit integers as text
        "at": "2026-01-01T00:00:00.123Z",
        "lines": [{"sku": "a", "qty": 3}],
    }
    # indexes [1]: the file's second message; [0, 0]: the first one's first nested message
    other = classes["shop.Other"](x="y")
    assert json.loads(decode(_framed(7, b"\x02\x02", other)) or "") == {"x": "y"}
    line = classes["shop.Order.Line"](sku="b")
    assert json.loads(decode(_framed(7, b"\x04\x00\x00", line)) or "") == {"sku": "b", "qty": 0}


def test_a_base64_descriptor_reads_as_its_text_does() -> None:
    from_text = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set("s", 1, TEXT))
    own = from_text.file[-1]
    registered = base64.b64encode(own.SerializeToString()).decode()
    from_base64 = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set("s", 2, registered))
    assert from_base64.file[-1] == own
    assert [f.name for f in from_base64.file[:-1]] == ["google/protobuf/timestamp.proto"]


@pytest.mark.parametrize(
    "value",
    [b"\x00\x00\x00\x00\x07\x00\xff\xff", b"\x00\x00\x00\x00\x08\x00", b"\x00\x00\x00", None],
    ids=["bad bytes", "unknown id", "short", "null"],
)
def test_what_does_not_decode_is_none_never_an_error(value: bytes | None) -> None:
    assert json_of({7: descriptor_set("s", 7, TEXT)})(value) is None


def test_a_schema_that_does_not_compile_or_imports_another_subject_is_named() -> None:
    with pytest.raises(SourceError, match=r"subject 'orders-value', id 3, does not compile"):
        descriptor_set("orders-value", 3, "message {")
    importing = descriptor_pb2.FileDescriptorProto(name="a.proto", dependency=["other.proto"])
    registered = base64.b64encode(importing.SerializeToString()).decode()
    with pytest.raises(SourceError, match=r"id 4, imports 'other.proto'.*schema reference"):
        descriptor_set("orders-value", 4, registered)


def test_the_first_message_gives_the_fields_and_their_structure() -> None:
    schemas = ProtobufSchemas("orders-value", (Version(7, TEXT, 1),))
    assert schemas.field_names() == ["id", "at", "lines"]
    assert schemas.is_timestamp("at") and not schemas.is_timestamp("id")
    line = RecordOf("Line", (ValueField("sku"), ValueField("qty", FieldType.INT)))
    fields = (ValueField("id", FieldType.LONG), ValueField("lines", ListOf(line)))
    assert mismatches(fields, schemas.shape()) == []
    assert mismatches((ValueField("at", line),), schemas.shape()) == [
        "at is record Line but a scalar"
    ]


RECURSIVE = """syntax = "proto3";
import "google/protobuf/wrappers.proto";
message Node { string name = 1; Node parent = 2; google.protobuf.StringValue label = 3; }
"""


def test_a_recursive_message_and_wrappers_have_a_shape_and_read_as_json() -> None:
    schemas = ProtobufSchemas("nodes-value", (Version(5, RECURSIVE, 1),))
    parent = RecordOf("Parent", (ValueField("name"),))
    fields = (ValueField("name"), ValueField("parent", parent), ValueField("label"))
    assert mismatches(fields, schemas.shape()) == []
    node = _classes_of(RECURSIVE, "Node")(name="a")
    node.parent.name = "b"
    node.label.value = "x"
    decoded = json_of({5: descriptor_set("s", 5, RECURSIVE)})(_framed(5, b"\x00", node))
    assert json.loads(decoded or "") == {"name": "a", "parent": {"name": "b"}, "label": "x"}


def test_negative_message_indexes_and_unwritable_json_are_dead_letters_not_errors() -> None:
    descriptors = descriptor_set("s", 7, TEXT)
    decode = json_of({7: descriptors})
    order = _classes(descriptors)["shop.Order"](id=1)
    assert decode(_framed(7, b"\x02\x01", order)) is None  # indexes [-1]
    order.at.nanos = 2_000_000_000  # no instant: protobuf's JSON refuses it
    assert decode(_framed(7, b"\x00", order)) is None


def _classes_of(text: str, name: str) -> Any:
    pool = descriptor_pool_of(descriptor_set("s", 5, text))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
