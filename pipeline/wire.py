"""Values in the Confluent wire format, and the Schema Registry subject their ids name.

A value is a zero byte, the 4-byte big-endian id of its writer schema in the registry,
then the payload in the subject's format (Avro binary, JSON text, or Protobuf's message
indexes and message). At start the pipeline reads every version of a view's subject
(`registered_versions`). A value not in the wire format is rejected with a reason saying
so, and so is a value whose id is past 2^31-1 (registries' ids are Java ints).

Any other id that is no version of the subject then may be a version registered while the
pipeline runs. It need not be newer than the others: a registry gives a schema it already
holds under another subject that schema's id. The batch holding it fails with
`unseen_schema_id`'s error before anything of it is written, and the pipeline restarts its
queries from their checkpoints (`pipeline.run`), reading the subject's versions anew. If
the id is still no version of the subject then (a stray: another subject's, or no schema at
all), it is passed as one of the subject's `strays` from then on, and its records go to the
dead letters (or are skipped, on a topic of several types): one restart per stray id and
pipeline process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError
from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.errors import RegistryUnavailableError, SourceError
from pipeline.shapes import Shape

__all__ = [
    "REASON_NOT_WIRE_FORMAT",
    "RegisteredSchemas",
    "Version",
    "Versions",
    "foreign_value",
    "framing_reason",
    "is_version",
    "payload",
    "registered_versions",
    "schema_id",
    "unknown_schema_id",
    "unseen_schema_id",
]

REASON_NOT_WIRE_FORMAT = (
    "value is not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
)
_HEADER_BYTES = 5
_MAX_ID = 2**31 - 1  # registries' ids are Java ints: a larger one is never a version
_UNSEEN = "statefed: schema id {id} is no version of subject {subject!r} read at the start"
_UNSEEN_PATTERN = re.compile(
    r"statefed: schema id (\d+) is no version of subject '(.*?)' read at the start"
)


class Version(NamedTuple):
    """One registered version of a subject: its schema id, its schema, its number."""

    id: int
    schema: str
    number: int


Versions = tuple[Version, ...]  # every version of a subject, oldest first


class RegisteredSchemas(Protocol):
    """The schemas of one subject, as a view's decoding uses them (`pipeline.avro`,
    `pipeline.jsonschema`)."""

    @property
    def subject(self) -> str:
        """The subject the schemas are registered under."""
        ...

    @property
    def writers(self) -> Versions:
        """Every version of the subject at the start, oldest first."""
        ...

    @property
    def strays(self) -> frozenset[int]:
        """Ids known to be no version of the subject (asked since the start)."""
        ...

    @property
    def newest(self) -> Version:
        """The newest version, whose fields a view reads."""
        ...

    def field_names(self) -> list[str]:
        """The fields of the newest schema."""
        ...

    def shape(self) -> Shape:
        """The structure of the newest schema (a record)."""
        ...

    def is_timestamp(self, field: str) -> bool:
        """Whether `field` decodes as a Spark timestamp rather than a number."""
        ...

    @property
    def fields_as_text(self) -> bool:
        """Whether each field decodes as its JSON text (else as Spark types: Avro)."""
        ...

    def decoded(self, fields: Sequence[str]) -> Column:
        """The decoded value, holding at least `fields`; null for an unknown id."""
        ...

    def reject_reason(self, decoded: Column) -> Column:
        """Why a non-null value cannot be read, or null."""
        ...


def unknown_schema_id(subject: str) -> str:
    """The reason of a value whose schema id is no version of `subject` (the id follows)."""
    return f"unknown schema id (no version of subject {subject!r}): "


def schema_id() -> Column:
    """The schema id of a value in the wire format, as a bigint (null for any other value).

    Its 4 bytes are read unsigned: an id past 2^31-1 (no registry's, whose ids are Java
    ints) would fail a cast to int in ANSI mode, and so every replay of its batch."""
    digits = F.hex(F.substring(F.col("value"), 2, 4))
    return F.when(_framed(), F.conv(digits, 16, 10).cast("bigint"))


def payload() -> Column:
    """The value's bytes after its header."""
    return F.expr(f"substring(value, {_HEADER_BYTES + 1})")


def framing_reason(registered: RegisteredSchemas) -> Column:
    """Why a non-null value is not a value of `registered`'s subject (not framed, or an id
    none of its writers has), or null; for an id no one asked the registry about yet, the
    error of `unseen_schema_id` (see the module's docs)."""
    subject = registered.subject
    unknown = F.concat(F.lit(unknown_schema_id(subject)), schema_id().cast("string"))
    ids = [version.id for version in registered.writers]
    before, after = _UNSEEN.split("{id}")
    message = F.concat(
        F.lit(before), schema_id().cast("string"), F.lit(after.format(subject=subject))
    )
    return (
        F.when(~_framed(), F.lit(REASON_NOT_WIRE_FORMAT))
        .when(_unseen(ids, registered.strays), F.raise_error(message).cast("string"))
        .when(~schema_id().isin(*ids), unknown)
    )


def foreign_value(registered: RegisteredSchemas) -> Column:
    """Whether a value is framed with the id of no version of the subject, known to be
    none (a stray, or past 2^31-1): on a topic of several types (`SubjectStrategy`), a
    value of another type."""
    ids = [version.id for version in registered.writers]
    return _framed() & ~schema_id().isin(*ids) & ~_unseen(ids, registered.strays)


def _framed() -> Column:
    """Whether a value starts with the wire format's header."""
    return (F.length(F.col("value")) >= _HEADER_BYTES) & (
        F.hex(F.substring(F.col("value"), 1, 1)) == F.lit("00")
    )


def _unseen(ids: list[int], strays: frozenset[int]) -> Column:
    """Whether a framed value's id is none of `ids` nor of `strays`, and one a registry
    could give."""
    unseen = _framed() & ~schema_id().isin(*ids) & (schema_id() <= _MAX_ID)
    return unseen & ~schema_id().isin(*sorted(strays)) if strays else unseen


def unseen_schema_id(error: BaseException | str) -> tuple[str, int] | None:
    """(subject, schema id) when `error` is the error of a value whose id was no version of
    its subject at the pipeline's start and is no known stray, else None."""
    found = _UNSEEN_PATTERN.search(str(error))
    return None if found is None else (found.group(2), int(found.group(1)))


def is_version(registry_url: str, subject: str, schema_id: int) -> bool:
    """Whether `schema_id` is a version of `subject` in the registry now; SourceError
    when the registry does not answer."""
    versions = _registered(registry_url, subject, f"subject {subject!r}")
    return any(version.schema_id == schema_id for version in versions)


def registered_versions(
    registry_url: str, subject: str, schema_type: str, format_name: str, reader: str
) -> Versions:
    """Every version of `subject` in the registry at `registry_url`, of `schema_type`
    (`AVRO`, `JSON`, `PROTOBUF`); SourceError naming the subject, the registry and the fix
    when there are none or they are of another type. `reader` names who reads them (`view x`)."""
    versions = _registered(registry_url, subject, reader)
    others = {v.schema.schema_type or "AVRO" for v in versions} - {schema_type}
    if others:
        raise SourceError(
            f"{reader} reads {format_name} values, but subject {subject!r} in the Schema "
            f"Registry at {registry_url} holds {', '.join(sorted(others))} schemas: set the "
            f"view's value_format to the subject's format, or name its {format_name} subject"
        )
    return tuple(Version(v.schema_id, v.schema.schema_str, v.version) for v in versions)


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
        raise RegistryUnavailableError(
            f"{reader} needs the Schema Registry at {registry_url}, which did not answer: "
            f"start it (`statefed registry`) or set STATEFED_REGISTRY_URL "
            f"({type(exc).__name__}: {exc})"
        ) from exc
