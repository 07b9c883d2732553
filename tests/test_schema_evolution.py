"""Schema evolution, as an operator meets it, with the real commands and a real Schema
Registry: `statefed fields` prints a registered version's value fields, pasted into a
catalogue of one's own; `statefed schema` prints its SDL and `--breaking` judges it
against the last one. A v2 that adds an optional field adds it to the SDL and breaks
nothing; a v3 the subject's compatibility rule (BACKWARD) forbids is refused by the
registry; a v3 the rule allows but that drops a field the view reads is refused by the
pipeline at start, naming the subject and the version, and the SDL its fields give is
judged breaking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from pipeline.avro import AvroSchemas
from pipeline.errors import SourceError
from pipeline.records import Decoding
from schema import View, load_catalogue
from tooling.registry import SchemaRegistry

STATEFED = str(Path(sys.executable).parent / "statefed")
SUBJECT = "orders-value"
AT: dict[str, object] = {
    "name": "placed_at",
    "type": {"type": "long", "logicalType": "timestamp-millis"},
}
SEATS: dict[str, object] = {"name": "seats", "type": "int"}
TRIP: dict[str, object] = {"name": "trip", "type": "string"}
NOTE: dict[str, object] = {"name": "note", "type": ["null", "string"], "default": None}
GATE: dict[str, object] = {"name": "gate", "type": "string"}


def _avro(*fields: dict[str, object]) -> Schema:
    record = {"type": "record", "name": "Order", "fields": list(fields)}
    return Schema(json.dumps(record), "AVRO")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    with SchemaRegistry(tmp_path_factory.mktemp("registry")) as running:
        yield running


def _statefed(registry: SchemaRegistry, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STATEFED_REGISTRY_URL": registry.url}
    env["STATEFED_CATALOGUE"] = "views:CATALOGUE"
    return subprocess.run(
        [STATEFED, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _catalogue(value_fields: str) -> str:
    """A catalogue of one latest view of orders, its value fields pasted as printed."""
    return (
        "from schema import EnumOf, FieldType, ListOf, RecordOf, ValueField, ValueFormat\n"
        "from schema import View, ViewKind\n\n"
        "CATALOGUE = [\n"
        "    View(\n"
        '        name="last_order",\n'
        '        topic="orders",\n'
        "        kind=ViewKind.LATEST,\n"
        '        key_field="customer",\n'
        '        type_name="LastOrder",\n'
        '        point_field="lastOrder",\n'
        '        many_field="lastOrders",\n'
        "        value_format=ValueFormat.AVRO,\n"
        + "".join(f"        {line}\n" for line in value_fields.splitlines())
        + "    ),\n]\n"
    )


def _sdl_of_newest(registry: SchemaRegistry, project: Path, name: str) -> tuple[str, Path]:
    """`statefed fields` of the subject, pasted into the catalogue; `statefed schema` of it,
    written to `name`: the printed fields and the SDL's file."""
    fields = _statefed(registry, project, "fields", SUBJECT)
    assert fields.returncode == 0, fields.stderr
    (project / "views.py").write_text(_catalogue(fields.stdout))
    sdl = project / name
    written = _statefed(registry, project, "schema", "--out", str(sdl))
    assert written.returncode == 0, written.stderr
    return fields.stdout, sdl


def test_an_added_optional_field_adds_to_the_sdl_and_an_incompatible_version_is_refused(
    registry: SchemaRegistry, tmp_path: Path
) -> None:
    with SchemaRegistryClient({"url": registry.url}) as client:
        client.register_schema(SUBJECT, _avro(TRIP, SEATS, AT))
        client.set_compatibility(SUBJECT, "BACKWARD")
        printed, v1 = _sdl_of_newest(registry, tmp_path, "v1.graphql")
        assert printed.splitlines()[0].startswith(f"# subject {SUBJECT}, version 1 ")
        assert 'ValueField("placedAt", FieldType.TIMESTAMP, source="placed_at"),' in printed

        client.register_schema(SUBJECT, _avro(TRIP, SEATS, AT, NOTE))  # v2: BACKWARD
        _, v2 = _sdl_of_newest(registry, tmp_path, "v2.graphql")
        assert "  note: String\n" in v2.read_text() and "note" not in v1.read_text()
        judged = _statefed(registry, tmp_path, "schema", "--breaking", str(v1))
        assert judged.returncode == 0, judged.stdout + judged.stderr

        # v3 adds a field without a default: v3 cannot read v2's records
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(SUBJECT, _avro(TRIP, SEATS, AT, NOTE, GATE))
        assert refused.value.http_status_code == 409, refused.value
        # v3 drops `trip`, which Avro's rule allows, but the view reads it
        client.register_schema(SUBJECT, _avro(SEATS, AT, NOTE))

    (view,) = _load(tmp_path)  # still the fields of v2
    newest = AvroSchemas.fetch(registry.url, SUBJECT, f"view {view.name}")
    with pytest.raises(SourceError, match=rf"\['trip'\].*subject '{SUBJECT}' \(version 3, "):
        Decoding.of(view, newest)

    _sdl_of_newest(registry, tmp_path, "v3.graphql")  # the fields v3 gives
    judged = _statefed(registry, tmp_path, "schema", "--breaking", str(v2))
    assert judged.returncode == 1
    assert "FIELD_REMOVED: Field LastOrder.trip was removed." in judged.stdout


def _load(project: Path) -> tuple[View, ...]:
    """The catalogue in `project`'s views.py, as the pipeline's driver loads it there."""
    sys.path.insert(0, str(project))
    try:
        sys.modules.pop("views", None)
        return load_catalogue("views:CATALOGUE")
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("views", None)


def test_fields_of_a_subject_the_registry_lacks_name_it_and_the_fix(
    registry: SchemaRegistry, tmp_path: Path
) -> None:
    missing = _statefed(registry, tmp_path, "fields", "nope-value")
    assert missing.returncode == 1
    assert "subject 'nope-value' is not in the Schema Registry" in missing.stderr
    assert "check the subject's name" in missing.stderr
