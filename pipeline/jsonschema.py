"""JSON Schema values in the Confluent wire format (`pipeline.wire`): JSON text after the
header, parsed by Spark's `from_json`.

The fields a view reads are read as text and typed later, as plain JSON values are
(`pipeline.records`), so a field of an unexpected type reads as null. The fields must be
properties of the subject's newest schema; the JSON itself is not validated against the
schema (the producer's serializer did that).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.errors import SourceError
from pipeline.shapes import Shape, json_schema_shape
from pipeline.wire import Version, Versions, framing_reason, payload, registered_versions, schema_id

__all__ = ["REASON_NOT_JSON_OBJECT", "JsonSchemas"]

REASON_NOT_JSON_OBJECT = "value's payload is not a JSON object"
_CORRUPT = "_corrupt_record"  # never a value field: those start with a lowercase letter


@dataclass(frozen=True)
class JsonSchemas:
    """The JSON Schemas of one subject; the newest names the fields there are."""

    subject: str
    writers: Versions
    strays: frozenset[int] = frozenset()  # ids known to be no version

    @classmethod
    def fetch(
        cls, registry_url: str, subject: str, reader: str, strays: frozenset[int] = frozenset()
    ) -> JsonSchemas:
        """Every version of `subject` (see `pipeline.wire.registered_versions`), and the
        ids known to be no version of it (`pipeline.wire`)."""
        versions = registered_versions(registry_url, subject, "JSON", "JSON Schema", reader)
        return cls(subject, versions, strays)

    @property
    def newest(self) -> Version:
        return self.writers[-1]

    def field_names(self) -> list[str]:
        """The properties of the newest schema (an object schema)."""
        newest = json.loads(self.newest.schema)
        properties = newest.get("properties") if isinstance(newest, dict) else None
        if not isinstance(properties, dict):
            raise SourceError(
                f"the newest schema of subject {self.subject!r} is no object schema with "
                f"properties: {self.newest.schema[:200]}"
            )
        return list(properties)

    def shape(self) -> Shape:
        """The structure of the newest schema."""
        return json_schema_shape(json.loads(self.newest.schema))

    @property
    def fields_as_text(self) -> bool:
        """Always: each field is read as its JSON text, as plain JSON's are."""
        return True

    def is_timestamp(self, field: str) -> bool:
        """Never: a JSON event time is a number of ms, read as plain JSON's is."""
        return False

    def decoded(self, fields: Sequence[str]) -> Column:
        """The payload parsed with every one of `fields` as text: null for an unknown id,
        `_corrupt_record` set when it is not a JSON object."""
        columns = ", ".join([*(f"`{name}` string" for name in fields), f"`{_CORRUPT}` string"])
        text = payload().cast("string")
        parsed = F.from_json(text, columns, {"columnNameOfCorruptRecord": _CORRUPT})
        return F.when(schema_id().isin(*self._ids()), parsed)

    def reject_reason(self, decoded: Column) -> Column:
        """Why a non-null value cannot be read, or null; `decoded` is its `decoded()`."""
        not_object = (
            ~F.is_valid_utf8(payload().cast("string"))
            | decoded.isNull()
            | decoded[_CORRUPT].isNotNull()
        )
        return F.coalesce(
            framing_reason(self),
            F.when(not_object, F.lit(REASON_NOT_JSON_OBJECT)),
        )

    def _ids(self) -> list[int]:
        return [writer.id for writer in self.writers]
