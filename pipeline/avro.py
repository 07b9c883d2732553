"""Avro values in the Confluent wire format, decoded by Spark's `from_avro`.

A value is a zero byte, the 4-byte big-endian id of its writer schema in the Schema
Registry, then the Avro binary of the record. At start the pipeline reads every version
of the view's subject (`AvroSchemas.fetch`); each value is decoded with the schema its id
names and resolved to the newest version (Avro's schema resolution: a field the writer
lacks takes the reader's default), so records of every version read as one struct.

A value whose id is no version of the subject when the pipeline started, whose bytes do
not decode, or which is not in the wire format, is rejected with a reason saying which.
A version registered later is read after a restart of the pipeline; until then its
records go to the dead letters, whence they can be replayed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from pipeline.errors import SourceError

__all__ = [
    "REASON_NOT_WIRE_FORMAT",
    "AvroSchemas",
    "not_decoded",
    "unknown_schema_id",
]

REASON_NOT_WIRE_FORMAT = (
    "value is not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
)
_TIMESTAMPS = ("timestamp-millis", "timestamp-micros", "local-timestamp-millis")
_HEADER_BYTES = 5


def unknown_schema_id(subject: str) -> str:
    """The reason of a value whose schema id is no version of `subject` (the id follows)."""
    return f"unknown schema id (no version of subject {subject!r} at the pipeline's start): "


def not_decoded(subject: str) -> str:
    """The reason of a value whose bytes do not decode with the schema of its id."""
    return f"value does not decode with its writer schema of subject {subject!r}, id "


@dataclass(frozen=True)
class AvroSchemas:
    """The Avro schemas of one subject: every version's (schema id, schema), oldest first;
    the newest is the reader schema."""

    subject: str
    writers: tuple[tuple[int, str], ...]

    @classmethod
    def fetch(cls, registry_url: str, subject: str, reader: str) -> AvroSchemas:
        """Every version of `subject` in the registry at `registry_url`; SourceError naming
        the subject, the registry and the fix when there are none or they are not Avro.
        `reader` names who reads them (e.g. `view last_booking`)."""
        versions = _registered(registry_url, subject, reader)
        not_avro = {v.schema.schema_type for v in versions} - {"AVRO", None}
        if not_avro:
            raise SourceError(
                f"{reader} reads Avro values, but subject {subject!r} in the Schema Registry "
                f"at {registry_url} holds {', '.join(sorted(not_avro))} schemas: set the "
                f"view's value_format to the subject's format, or name its Avro subject"
            )
        return cls(subject, tuple((v.schema_id, v.schema.schema_str) for v in versions))

    @property
    def reader(self) -> str:
        return self.writers[-1][1]

    def field_names(self) -> list[str]:
        """The reader schema's field names."""
        return [field["name"] for field in _record(self.reader)["fields"]]

    def is_timestamp(self, field: str) -> bool:
        """Whether `field` of the reader schema is a timestamp (decoded as a Spark
        timestamp, not a number)."""
        (declared,) = [f["type"] for f in _record(self.reader)["fields"] if f["name"] == field]
        branches = declared if isinstance(declared, list) else [declared]
        return any(isinstance(b, dict) and b.get("logicalType") in _TIMESTAMPS for b in branches)

    def schema_id(self) -> Column:
        """The value's schema id (null for a value shorter than its header)."""
        return F.conv(F.hex(F.substring(F.col("value"), 2, 4)), 16, 10).cast("int")

    def decoded(self) -> Column:
        """The value as a struct of the reader schema; a struct of nulls when its bytes do
        not decode, null when its id is unknown."""
        payload = F.expr(f"substring(value, {_HEADER_BYTES + 1})")
        options = {"mode": "PERMISSIVE", "avroSchema": self.reader}
        (first_id, first), *others = self.writers
        decoded = F.when(self.schema_id() == first_id, from_avro(payload, first, options))
        for schema_id, schema in others:
            decoded = decoded.when(
                self.schema_id() == schema_id, from_avro(payload, schema, options)
            )
        return decoded

    def reject_reason(self, decoded: Column) -> Column:
        """Why a non-null value cannot be read, or null; `decoded` is its `decoded()`."""
        framed = (F.length(F.col("value")) >= _HEADER_BYTES) & (
            F.hex(F.substring(F.col("value"), 1, 1)) == F.lit("00")
        )
        garbled = F.lit(True)
        for name in self.field_names():
            garbled = garbled & decoded[name].isNull()
        return (
            F.when(~framed, F.lit(REASON_NOT_WIRE_FORMAT))
            .when(
                decoded.isNull(),
                F.concat(F.lit(unknown_schema_id(self.subject)), self.schema_id().cast("string")),
            )
            .when(
                garbled & F.lit(self._has_required_field()),
                F.concat(F.lit(not_decoded(self.subject)), self.schema_id().cast("string")),
            )
        )

    def _has_required_field(self) -> bool:
        """Spark's PERMISSIVE `from_avro` decodes bad bytes as a struct of nulls: that is
        told from a record only when some field cannot be null."""
        return any(not _nullable(f["type"]) for f in _record(self.reader)["fields"])


def _registered(registry_url: str, subject: str, reader: str) -> list[Any]:
    try:
        with SchemaRegistryClient({"url": registry_url}) as client:
            versions = [client.get_version(subject, v) for v in client.get_versions(subject)]
            if versions:
                return versions
            raise SchemaRegistryError(404, 40401, f"subject {subject!r} has no versions")
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise SourceError(
                f"{reader} reads subject {subject!r}, which the Schema Registry at "
                f"{registry_url} does not have: register the topic's value schema there, or "
                f"name its subject in the view's value_subject ({exc})"
            ) from exc
        raise SourceError(f"{reader}: the Schema Registry at {registry_url} failed: {exc}") from exc
    except Exception as exc:  # the client's transport: refused, timed out, no such host
        raise SourceError(
            f"{reader} needs the Schema Registry at {registry_url}, which did not answer: "
            f"start it (`statefed registry`) or set STATEFED_REGISTRY_URL "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def _record(schema: str) -> dict[str, Any]:
    parsed = json.loads(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SourceError(f"an Avro value schema must be a record, got: {schema[:200]}")
    return parsed


def _nullable(declared: object) -> bool:
    return declared == "null" or (isinstance(declared, list) and "null" in declared)
