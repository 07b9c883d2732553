"""Avro values in the Confluent wire format (`pipeline.wire`), decoded by Spark's
`from_avro`.

Each value is decoded with the schema its id names and resolved to the newest version of
the subject (Avro's schema resolution: a field the writer lacks takes the reader's
default), so records of every version read as one struct. A version the newest cannot
resolve (under a FORWARD or NONE rule of the registry: a field added without a default, a
type changed) is said at start, and its records are dead letters naming both versions and
why; Apache Avro's own compatibility checker judges it, as the registry does.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from pipeline.errors import SourceError
from pipeline.shapes import Shape, avro_shape
from pipeline.wire import Version, Versions, framing_reason, payload, registered_versions, schema_id

log = logging.getLogger(__name__)

__all__ = ["AvroSchemas", "not_decoded"]

# the logical types Spark decodes as a timestamp: a local one (TIMESTAMP_NTZ) as its wall-clock
# time in UTC, the session's zone (`pipeline.session`), which is the instant its number holds
_TIMESTAMPS = (
    "timestamp-millis",
    "timestamp-micros",
    "local-timestamp-millis",
    "local-timestamp-micros",
)


def not_decoded(subject: str) -> str:
    """The reason of a value whose bytes do not decode with the schema of its id."""
    return f"value does not decode with its writer schema of subject {subject!r}, id "


@dataclass(frozen=True)
class AvroSchemas:
    """The Avro schemas of one subject; the newest is the reader schema."""

    subject: str
    writers: Versions
    strays: frozenset[int] = frozenset()  # ids known to be no version

    @classmethod
    def fetch(
        cls, registry_url: str, subject: str, reader: str, strays: frozenset[int] = frozenset()
    ) -> AvroSchemas:
        """Every version of `subject` (see `pipeline.wire.registered_versions`), and the
        ids known to be no version of it (`pipeline.wire`)."""
        versions = registered_versions(registry_url, subject, "AVRO", "Avro", reader)
        schemas = cls(subject, versions, strays)
        for reason in schemas.unresolved.values():
            log.warning("subject %r: records of %s go to the dead letters", subject, reason)
        return schemas

    @property
    def newest(self) -> Version:
        return self.writers[-1]

    @property
    def reader(self) -> str:
        return self.newest.schema

    @functools.cached_property
    def _reader_fields(self) -> list[dict[str, Any]]:
        """The reader schema's fields, parsed once."""
        fields: list[dict[str, Any]] = _record(self.reader)["fields"]
        return fields

    def field_names(self) -> list[str]:
        """The reader schema's field names."""
        return [field["name"] for field in self._reader_fields]

    def shape(self) -> Shape:
        """The structure of the reader schema."""
        return avro_shape(_record(self.reader))

    @property
    def fields_as_text(self) -> bool:
        """Never: from_avro decodes Spark types (structs, arrays, timestamps)."""
        return False

    def is_timestamp(self, field: str) -> bool:
        """Whether `field` of the reader schema is a timestamp (decoded as a Spark
        timestamp, not a number)."""
        (declared,) = [f["type"] for f in self._reader_fields if f["name"] == field]
        branches = declared if isinstance(declared, list) else [declared]
        return any(isinstance(b, dict) and b.get("logicalType") in _TIMESTAMPS for b in branches)

    def decoded(self, fields: Sequence[str]) -> Column:
        """The value as a struct of the reader schema (all its fields, not only `fields`);
        a struct of nulls when its bytes do not decode, null when its id is unknown."""
        options = {"mode": "PERMISSIVE", "avroSchema": self.reader}
        first, *others = self.writers
        decoded = F.when(schema_id() == first.id, from_avro(payload(), first.schema, options))
        for writer in others:
            decoded = decoded.when(
                schema_id() == writer.id, from_avro(payload(), writer.schema, options)
            )
        return decoded

    @functools.cached_property
    def unresolved(self) -> dict[int, str]:
        """The versions the newest cannot resolve, by schema id: what is wrong, said."""
        newest = self.newest
        found: dict[int, str] = {}
        try:
            reader = avro.schema.parse(newest.schema)
            writers = [(w, avro.schema.parse(w.schema)) for w in self.writers[:-1]]
        except avro.errors.AvroException as exc:  # Spark's from_avro will say what it lacks
            log.warning(
                "subject %r: versions not checked against the newest: %s", self.subject, exc
            )
            return found
        for writer, parsed in writers:
            result = ReaderWriterCompatibilityChecker().get_compatibility(reader, parsed)
            if result.compatibility is not SchemaCompatibilityType.compatible:
                kinds = ", ".join(sorted(i.value for i in result.incompatibilities))
                what = "; ".join(sorted(result.messages))
                found[writer.id] = (
                    f"version {writer.number} (schema id {writer.id}), which the newest, "
                    f"version {newest.number}, cannot read ({kinds}: {what}): give the new "
                    f"field a default, or keep the subject's compatibility BACKWARD"
                )
        return found

    def reject_reason(self, decoded: Column) -> Column:
        """Why a non-null value cannot be read, or null; `decoded` is its `decoded()`."""
        garbled = F.lit(True)
        for name in self.field_names():
            garbled = garbled & decoded[name].isNull()
        bad_bytes = F.concat(F.lit(not_decoded(self.subject)), schema_id().cast("string"))
        unresolved = F.lit(None)
        for schema, reason in self.unresolved.items():
            unresolved = F.when(schema_id() == schema, F.lit(f"value of {reason}")).otherwise(
                unresolved
            )
        return F.coalesce(
            framing_reason(self),
            unresolved,
            F.when(garbled & F.lit(self._has_required_field()), bad_bytes),
        )

    def _has_required_field(self) -> bool:
        """Spark's PERMISSIVE `from_avro` decodes bad bytes as a struct of nulls: that is
        told from a record only when some field cannot be null."""
        return any(not _nullable(f["type"]) for f in self._reader_fields)


def _record(schema: str) -> dict[str, Any]:
    parsed = json.loads(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SourceError(f"an Avro value schema must be a record, got: {schema[:200]}")
    return parsed


def _nullable(declared: object) -> bool:
    return declared == "null" or (isinstance(declared, list) and "null" in declared)
