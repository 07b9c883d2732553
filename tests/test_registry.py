"""The local Schema Registry (`tooling.registry`, `statefed registry`): a real Apicurio
Registry that confluent-kafka's client and Avro serializers use as Confluent's own, that
refuses an incompatible schema, and that is gone when its handle stops it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.classdata import assert_maps_its_archive
from tooling.broker import free_port
from tooling.processes import wait_until
from tooling.registry import RegistryStartError, SchemaRegistry

Field = dict[str, object]
TRIP: Field = {"name": "trip", "type": "string"}
SEATS: Field = {"name": "seats", "type": "int"}
NOTE: Field = {"name": "note", "type": ["null", "string"], "default": None}


def _booking(*fields: Field) -> Schema:
    record = {"type": "record", "name": "Booking", "namespace": "statefed", "fields": fields}
    return Schema(json.dumps(record), "AVRO")


V1 = _booking(TRIP, SEATS)
V2 = _booking(TRIP, SEATS, NOTE)  # an optional field with a default: BACKWARD compatible
V3 = _booking(TRIP, {**SEATS, "type": "string"}, NOTE)  # int to string: incompatible


def test_a_missing_release_names_the_make_target(tmp_path: Path) -> None:
    registry = SchemaRegistry(tmp_path, directory=tmp_path / "registry")
    with pytest.raises(RegistryStartError, match=r"3\.0\.9 is not in .*: run `make registry`"):
        registry.start()
    assert not registry.running


def test_the_jvm_maps_the_class_data_archive_make_install_wrote(tmp_path: Path) -> None:
    with SchemaRegistry(tmp_path) as registry:
        assert registry.pid is not None
        assert_maps_its_archive("registry", registry.pid)


def test_avro_records_round_trip_and_an_incompatible_schema_is_refused(tmp_path: Path) -> None:
    registry = SchemaRegistry(tmp_path)
    registry.start()
    try:
        with SchemaRegistryClient({"url": registry.url}) as client:
            _serialize_and_evolve(client)
    finally:
        pid = registry.pid
        registry.stop()
    assert not registry.running
    assert pid is not None and not psutil.pid_exists(pid)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{registry.url}/subjects", timeout=2)


def _serialize_and_evolve(client: SchemaRegistryClient) -> None:
    """v1 under BACKWARD, a record through the Avro serializers, then v2 taken, v3 refused."""
    subject = "bookings-value"  # the serializers' default: <topic>-value
    client.set_compatibility(subject, "BACKWARD")
    assert client.get_compatibility(subject) == "BACKWARD"
    v1 = client.register_schema(subject, V1)

    context = SerializationContext("bookings", MessageField.VALUE)
    serialize = AvroSerializer(client, V1.schema_str, conf={"auto.register.schemas": False})
    booking = {"trip": "ZRH-LIS", "seats": 2}
    data = serialize(booking, context)
    assert data is not None
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == v1  # magic byte, schema id
    assert AvroDeserializer(client)(data, context) == booking

    v2 = client.register_schema(subject, V2)
    assert v2 != v1
    assert client.get_versions(subject) == [1, 2]
    # a v2 reader reads v1's record, the new field at its default
    assert AvroDeserializer(client, V2.schema_str)(data, context) == {**booking, "note": None}

    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, V3)
    assert refused.value.http_status_code == 409
    assert client.get_versions(subject) == [1, 2]


def test_the_command_prints_the_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    command = [sys.executable, "-m", "tooling.cli", "registry", "--port", str(port)]
    command += ["--dir", str(tmp_path / "registry")]
    output = tmp_path / "stderr.txt"
    with output.open("w") as stderr:
        process = subprocess.Popen(command, stderr=stderr)
    try:
        # the line comes once it serves and has its signal handlers
        wait_until(lambda: "ready" in output.read_text(), 90, f"statefed registry ({output})")
        assert httpx.get(f"{url}/subjects", timeout=5).json() == []
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    finally:
        process.kill()
        process.wait(10)
    said = output.read_text()
    assert process.returncode == 0, said
    assert f"clients use {url}" in said
    assert said.rstrip().endswith("statefed registry: stopped")
    assert (tmp_path / "registry" / "registry.log").stat().st_size > 0
