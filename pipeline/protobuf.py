"""Protobuf values in the Confluent wire format (`pipeline.wire`): after the header, the
message indexes (which message of the schema's file: zigzag varints, one 0 byte for the
file's first message), then the message.

Spark's own Protobuf functions (spark-protobuf) are published for no Spark 4 release, so a
Python UDF decodes each value, with the schema its id names, into protobuf's JSON mapping
(field names as the .proto has them; 64-bit integers, enums and well-known types such as
`google.protobuf.Timestamp` as text), read as a plain JSON value is (`pipeline.records`).
A field a writer's schema lacks reads as null, so records of every version read alike.

A version is registered as .proto text (what Java's serializer and most tools register),
compiled at start by protoc (grpcio-tools, with the well-known types it ships), or as a
base64 FileDescriptorProto (what Confluent's Python serializer registers). A schema that
imports another subject's schema (a schema reference) is not read: the pipeline names it
at start.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import importlib.resources
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.errors import SourceError
from pipeline.shapes import Shape
from pipeline.wire import Version, Versions, framing_reason, registered_versions, schema_id

__all__ = [
    "SCALAR_MESSAGES",
    "ProtobufSchemas",
    "compile_proto",
    "descriptor_pool_of",
    "descriptor_set",
    "json_of",
    "messages_of",
    "not_decoded",
]

_CORRUPT = "_corrupt_record"  # never a value field: those start with a lowercase letter
_FILE = "value.proto"  # the name each version's text is compiled under
_TIMESTAMP = "google.protobuf.Timestamp"
# well-known messages protobuf's JSON writes as one scalar (an instant, a number, text)
SCALAR_MESSAGES = frozenset(
    {
        _TIMESTAMP,
        "google.protobuf.Duration",
        "google.protobuf.FieldMask",
        *(
            f"google.protobuf.{kind}Value"
            for kind in ("Bool", "Bytes", "Double", "Float", "Int32", "Int64", "String")
        ),
        "google.protobuf.UInt32Value",
        "google.protobuf.UInt64Value",
    }
)
_WELL_KNOWN = [
    "any_pb2",
    "duration_pb2",
    "empty_pb2",
    "field_mask_pb2",
    "struct_pb2",
    "timestamp_pb2",
    "wrappers_pb2",
]


def not_decoded(subject: str) -> str:
    """The reason of a value whose bytes do not decode with the schema of its id."""
    return f"value does not decode as a Protobuf message of subject {subject!r}, id "


def descriptor_set(subject: str, version_id: int, schema: str) -> bytes:
    """The FileDescriptorSet (serialized, its own file last) of a registered version, given
    as .proto text or as a base64 FileDescriptorProto."""
    try:
        proto_file = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(schema, validate=True)
        )
    except (binascii.Error, DecodeError):
        return compile_proto(subject, version_id, schema)
    found = descriptor_pb2.FileDescriptorSet()
    for dependency in proto_file.dependency:
        found.file.append(_well_known(subject, version_id, dependency))
    found.file.append(proto_file)
    return found.SerializeToString()


def _well_known(subject: str, version_id: int, name: str) -> descriptor_pb2.FileDescriptorProto:
    """A file of protobuf's well-known types (google/protobuf/*.proto), as its runtime has it."""
    for module in _WELL_KNOWN:  # imported so that the default pool holds their files
        importlib.import_module(f"google.protobuf.{module}")
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise SourceError(
            f"the Protobuf schema of subject {subject!r}, id {version_id}, imports {name!r}, "
            f"another subject's schema (a schema reference), which statefed does not read yet"
        ) from None
    proto_file = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto_file)
    return proto_file


def compile_proto(subject: str, version_id: int, text: str) -> bytes:
    """The FileDescriptorSet (serialized, with its imports) of a version's .proto text;
    SourceError naming the subject, the id and protoc's complaint when it does not compile."""
    from grpc_tools import protoc  # only where Protobuf is read: protoc is large

    includes = importlib.resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as directory:
        source, out = Path(directory, _FILE), Path(directory, "set.pb")
        source.write_text(text, encoding="utf-8")
        arguments = [f"-I{directory}", f"-I{includes}", "--include_imports"]
        code = protoc.main(["protoc", *arguments, f"--descriptor_set_out={out}", str(source)])
        if code != 0:
            raise SourceError(
                f"the Protobuf schema of subject {subject!r}, id {version_id}, does not compile "
                f"(protoc's message is on the pipeline's stderr; a schema importing another "
                f"subject's is not read): {text[:200]}"
            )
        return out.read_bytes()


def descriptor_pool_of(descriptor_set: bytes) -> descriptor_pool.DescriptorPool:
    """A pool holding every file of a serialized FileDescriptorSet."""
    pool = descriptor_pool.DescriptorPool()
    for proto_file in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file:
        pool.Add(proto_file)
    return pool


def messages_of(descriptors: bytes) -> list[Descriptor]:
    """The top-level messages of the set's own file (its last), in their order."""
    own = descriptor_pb2.FileDescriptorSet.FromString(descriptors).file[-1].name
    return list(descriptor_pool_of(descriptors).FindFileByName(own).message_types_by_name.values())


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """A zigzag varint at `offset`, and the offset after it."""
    shift = result = 0
    while True:
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset
        shift += 7


def _message_at(messages: list[Descriptor], data: bytes) -> tuple[Descriptor, int]:
    """The message the indexes after the header name, and where its bytes start."""
    count, offset = _varint(data, 5)
    indexes = [0] if count == 0 else []
    for _ in range(count):
        index, offset = _varint(data, offset)
        indexes.append(index)
    if count < 0 or min(indexes) < 0:
        raise ValueError(f"negative message indexes {count}, {indexes}")
    message = messages[indexes[0]]
    for index in indexes[1:]:
        message = message.nested_types[index]
    return message, offset


def json_of(descriptor_sets: Mapping[int, bytes]) -> Callable[[bytes | None], str | None]:
    """What decodes a framed value into its JSON text, or None when it does not decode
    (an id of none of `descriptor_sets`, bad indexes, bad bytes); run in Spark's Python
    workers (which import this module: ship it with the pipeline where executors run
    elsewhere), building each version's messages once per task that unpickles it."""

    pools: dict[int, list[Descriptor]] = {}  # filled in each worker (a cache would not pickle)

    def pool_of(version_id: int) -> list[Descriptor]:
        if version_id not in pools:
            pools[version_id] = messages_of(descriptor_sets[version_id])
        return pools[version_id]

    def decode(value: bytes | None) -> str | None:
        from google.protobuf import json_format, message_factory

        if value is None or len(value) < 6 or value[0] != 0:
            return None
        version_id = int.from_bytes(value[1:5], "big")
        if version_id not in descriptor_sets:
            return None
        try:
            descriptor, offset = _message_at(pool_of(version_id), value)
            message = message_factory.GetMessageClass(descriptor).FromString(value[offset:])
            return json_format.MessageToJson(
                message,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
                indent=None,
            )
        # any value that does not decode (bad bytes, indexes, a Timestamp out of range, an
        # Any of an unknown type) is a dead letter, never a failed batch
        except Exception:
            return None

    return decode


def _field_shape(field: FieldDescriptor, seen: dict[str, Shape]) -> Shape:
    message = field.message_type
    if message is None or message.full_name in SCALAR_MESSAGES:
        item = Shape("a scalar", scalar=True)
    elif message.GetOptions().map_entry:
        item = Shape("a map")
    elif message.full_name.startswith("google.protobuf."):  # Struct, Value, Any, Empty
        item = Shape(f"a {message.full_name}")
    else:
        item = _message_shape(message, seen)
    return Shape("a repeated field", item=item) if field.is_repeated else item


def _message_shape(message: Descriptor, seen: dict[str, Shape] | None = None) -> Shape:
    """The shape of `message`; a message met again (a recursive one) is the same shape."""
    seen = {} if seen is None else seen
    if message.full_name in seen:
        return seen[message.full_name]
    fields: dict[str, Shape] = {}
    seen[message.full_name] = shape = Shape(f"message {message.name}", fields)
    for field in message.fields:
        fields[field.name] = _field_shape(field, seen)
    return shape


@dataclass(frozen=True)
class ProtobufSchemas:
    """The Protobuf schemas of one subject, each compiled; the newest names the fields."""

    subject: str
    writers: Versions
    strays: frozenset[int] = frozenset()  # ids known to be no version

    @classmethod
    def fetch(
        cls, registry_url: str, subject: str, reader: str, strays: frozenset[int] = frozenset()
    ) -> ProtobufSchemas:
        """Every version of `subject` (see `pipeline.wire.registered_versions`), and the
        ids known to be no version of it (`pipeline.wire`)."""
        versions = registered_versions(registry_url, subject, "PROTOBUF", "Protobuf", reader)
        return cls(subject, versions, strays)

    @functools.cached_property
    def _descriptor_sets(self) -> dict[int, bytes]:
        return {w.id: descriptor_set(self.subject, w.id, w.schema) for w in self.writers}

    @functools.cached_property
    def _newest(self) -> Descriptor:
        messages = messages_of(self._descriptor_sets[self.newest.id])
        if not messages:
            raise SourceError(f"the newest schema of subject {self.subject!r} has no message")
        return messages[0]

    @property
    def newest(self) -> Version:
        return self.writers[-1]

    @property
    def fields_as_text(self) -> bool:
        """Always: a value is decoded into its JSON, read as plain JSON's is."""
        return True

    def field_names(self) -> list[str]:
        """The fields of the newest schema's first message (the one TopicNameStrategy
        subjects hold)."""
        return [field.name for field in self._newest.fields]

    def shape(self) -> Shape:
        """The structure of the newest schema's first message."""
        return _message_shape(self._newest)

    def is_timestamp(self, field: str) -> bool:
        """Whether `field` is a `google.protobuf.Timestamp` (its JSON is RFC 3339 text)."""
        found = self._newest.fields_by_name[field]
        return found.message_type is not None and found.message_type.full_name == _TIMESTAMP

    def decoded(self, fields: Sequence[str]) -> Column:
        """The value's JSON parsed with every one of `fields` as text: null for an unknown
        id, `_corrupt_record` set when its bytes do not decode."""
        # Arrow-batched (and named, so Spark does not guess the kind from type hints)
        decode = F.udf(json_of(self._descriptor_sets), "string", useArrow=True)
        text = F.coalesce(decode(F.col("value")), F.lit("not decoded"))
        columns = ", ".join([*(f"`{name}` string" for name in fields), f"`{_CORRUPT}` string"])
        parsed = F.from_json(text, columns, {"columnNameOfCorruptRecord": _CORRUPT})
        return F.when(schema_id().isin(*self._descriptor_sets), parsed)

    def reject_reason(self, decoded: Column) -> Column:
        """Why a non-null value cannot be read, or null; `decoded` is its `decoded()`."""
        bad_bytes = F.concat(F.lit(not_decoded(self.subject)), schema_id().cast("string"))
        return F.coalesce(
            framing_reason(self),
            F.when(decoded.isNull() | decoded[_CORRUPT].isNotNull(), bad_bytes),
        )
