"""The conformance matrix, end to end on real parts. Every value format (plain JSON, and
JSON Schema, Avro and Protobuf through a real Schema Registry) comes with two key types, and
every key type (string, int, long, and a record of a string, a long and an int, written as
compact JSON) with two formats (tests/conformance/views.py says why). Each value carries
one field per schema shape (scalars, a 64-bit integer, a decimal, a timestamp, a date, an
enum, lists of scalars, of enums and of records, a record nested in a record, optional
fields and an optional record, names to sanitize, and a field v2 of the schema adds).
Every value queried back through the gateway, by a multi-key lookup (read from the nodes,
then again from the gateway's cache), a point lookup and a scan, equals what was
produced.

Avro, JSON Schema and Protobuf values are written by Confluent's serializers
(confluent-kafka) with the schema version each record names: half of each topic's records
with v1, half with v2, so v1 records read `added` as null. Protobuf's serializer registers
its schemas itself (as base64 descriptors, as it does for its users); the others' are
registered as schema text.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format, message_factory

from gateway.api.fields.keys import key_names
from pipeline.protobuf import compile_proto, descriptor_pool_of
from schema import KeyType, RecordKey, ValueFormat, View
from tests.conformance.views import CATALOGUE, STATUS
from tests.e2e.conftest import Cluster
from tooling.localcluster import LocalCluster
from tooling.processes import wait_until
from tooling.registry import SchemaRegistry

CATALOGUE_SPEC = "tests.conformance.views:CATALOGUE"
KEYS_PER_VIEW = 120  # the first half written with v1 of the schema, the rest with v2
ANSWER_TIMEOUT_S = 180.0  # for the pipeline's start and every record to be answered
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Value = dict[str, Any]

# --- the schemas: v2 adds the optional field `added` -------------------------------------

_GEO = {
    "type": "record",
    "name": "Geo",
    "fields": [{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}],
}
_ADDRESS = {
    "type": "record",
    "name": "Address",
    "fields": [
        {"name": "city", "type": "string"},
        {"name": "zip_code", "type": "string"},
        {"name": "geo", "type": _GEO},
    ],
}
_STOP = {
    "type": "record",
    "name": "Stop",
    "fields": [{"name": "city", "type": "string"}, {"name": "minutes", "type": "int"}],
}
_AVRO_FIELDS: list[Value] = [
    {"name": "name", "type": "string"},
    {"name": "count", "type": "int"},
    {"name": "big", "type": "long"},
    {"name": "ratio", "type": "double"},
    {"name": "flag", "type": "boolean"},
    {
        "name": "price",
        "type": {"type": "bytes", "logicalType": "decimal", "precision": 14, "scale": 2},
    },
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": list(STATUS.symbols)}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "moods", "type": {"type": "array", "items": "Status"}},
    {"name": "address", "type": _ADDRESS},
    {"name": "stops", "type": {"type": "array", "items": _STOP}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "maybe_address", "type": ["null", "Address"], "default": None},
    {"name": "order_id", "type": "long"},
]
_ADDED_AVRO = {"name": "added", "type": ["null", "string"], "default": None}


def _avro_schema(version: int) -> str:
    fields = _AVRO_FIELDS + ([_ADDED_AVRO] if version == 2 else [])
    return json.dumps({"type": "record", "name": "Shape", "namespace": "t", "fields": fields})


def _closed(properties: Value, required: list[str]) -> Value:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_JSON_ADDRESS = _closed(
    {
        "city": {"type": "string"},
        "zip_code": {"type": "string"},
        "geo": _closed({"lat": {"type": "number"}, "lon": {"type": "number"}}, ["lat", "lon"]),
    },
    ["city", "zip_code", "geo"],
)
_JSON_STATUS = {"type": "string", "enum": list(STATUS.symbols)}
_JSON_PROPERTIES: Value = {
    "name": {"type": "string"},
    "count": {"type": "integer"},
    "big": {"type": "integer"},
    "ratio": {"type": "number"},
    "flag": {"type": "boolean"},
    "price": {"type": "string"},
    "at": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "status": _JSON_STATUS,
    "tags": {"type": "array", "items": {"type": "string"}},
    "moods": {"type": "array", "items": _JSON_STATUS},
    "address": _JSON_ADDRESS,
    "stops": {
        "type": "array",
        "items": _closed({"city": {"type": "string"}, "minutes": {"type": "integer"}}, []),
    },
    "note": {"type": ["string", "null"]},
    "maybe_address": {"oneOf": [{"type": "null"}, _JSON_ADDRESS]},
    "order_id": {"type": "integer"},
}
_OPTIONAL = ("note", "maybe_address", "added")


def _json_schema(version: int) -> str:
    properties = {**_JSON_PROPERTIES}
    if version == 2:
        properties["added"] = {"type": ["string", "null"]}
    required = [name for name in properties if name not in _OPTIONAL]
    return json.dumps(
        {"$schema": "http://json-schema.org/draft-07/schema#", **_closed(properties, required)}
    )


_PROTO = """syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
message Shape {
  string name = 1;
  int32 count = 2;
  int64 big = 3;
  double ratio = 4;
  bool flag = 5;
  string price = 6;
  google.protobuf.Timestamp at = 7;
  string day = 8;
  Status status = 9;
  repeated string tags = 10;
  repeated Status moods = 11;
  Address address = 12;
  repeated Stop stops = 13;
  optional string note = 14;
  Address maybe_address = 15;
  int64 order_id = 16;%s
}
enum Status { OPEN = 0; PAID = 1; SHIPPED = 2; }
message Geo { double lat = 1; double lon = 2; }
message Address { string city = 1; string zip_code = 2; Geo geo = 3; }
message Stop { string city = 1; int32 minutes = 2; }
"""


def _proto_class(version: int) -> Any:
    """The generated message class of the schema's `version` (protoc, as a user's build
    generates it)."""
    text = _PROTO % ("\n  optional string added = 17;" if version == 2 else "")
    pool = descriptor_pool_of(compile_proto("shapes", version, text))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Shape"))


_SCHEMAS: dict[ValueFormat, tuple[str, Callable[[int], str]]] = {
    ValueFormat.AVRO: ("AVRO", _avro_schema),
    ValueFormat.JSON_SCHEMA: ("JSON", _json_schema),
}

# --- the values: one random truth per key, written as each format writes it --------------


def _text(rng: random.Random) -> str:
    return rng.choice(["", "a", "Zürich", "東京", "emoji 🎉", 'quote " and \\']) + str(
        rng.randrange(1000)
    )


def _address(rng: random.Random) -> Value:
    geo = {"lat": rng.uniform(-90, 90), "lon": rng.uniform(-180, 180)}
    return {"city": _text(rng), "zip_code": f"{rng.randrange(10**5):05d}", "geo": geo}


def _truth(rng: random.Random, version: int) -> Value:
    """A value in Python's types (Decimal, datetime, date), keyed by the names in the value."""
    truth: Value = {
        "name": _text(rng),
        "count": rng.randint(-(2**31), 2**31 - 1),
        "big": rng.randint(-(2**63), 2**63 - 1),
        "ratio": rng.uniform(-1e9, 1e9),
        "flag": rng.random() < 0.5,
        "price": Decimal(rng.randint(-(10**12), 10**12)).scaleb(-2),
        "at": EPOCH + timedelta(milliseconds=rng.randint(0, 4_102_444_800_000)),
        "day": date(1970, 1, 1) + timedelta(days=rng.randint(-20_000, 50_000)),
        "status": rng.choice(STATUS.symbols),
        "tags": [_text(rng) for _ in range(rng.randrange(4))],
        "moods": [rng.choice(STATUS.symbols) for _ in range(rng.randrange(4))],
        "address": _address(rng),
        "stops": [
            {"city": _text(rng), "minutes": rng.randint(0, 600)} for _ in range(rng.randrange(4))
        ],
        "note": rng.choice([None, _text(rng)]),
        "maybe_address": rng.choice([None, _address(rng)]),
        "order_id": rng.randint(0, 2**63 - 1),
    }
    if version == 2:
        truth["added"] = rng.choice([None, _text(rng)])
    return truth


def _as_json(truth: Value, timestamp: Callable[[datetime], Any]) -> Value:
    """`truth` as JSON holds it: a decimal and a date as text, a timestamp as `timestamp`."""
    return {
        **truth,
        "price": str(truth["price"]),
        "at": timestamp(truth["at"]),
        "day": truth["day"].isoformat(),
    }


def _ms(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(milliseconds=1)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _expected(truth: Value) -> Value:
    """What the gateway answers for `truth`, normalized as `_normalized` reads answers."""

    def address(found: Value | None) -> Value | None:
        if found is None:
            return None
        return {"city": found["city"], "zipCode": found["zip_code"], "geo": found["geo"]}

    return {
        "name": truth["name"],
        "count": truth["count"],
        "big": str(truth["big"]),
        "ratio": truth["ratio"],
        "flag": truth["flag"],
        "price": truth["price"],
        "at": truth["at"],
        "day": truth["day"].isoformat(),
        "status": truth["status"],
        "tags": truth["tags"],
        "moods": truth["moods"],
        "address": address(truth["address"]),
        "stops": truth["stops"],
        "note": truth["note"],
        "maybeAddress": address(truth["maybe_address"]),
        "orderId": str(truth["order_id"]),
        "added": truth.get("added"),
    }


def _normalized(answer: Value) -> Value:
    """An answer's fields with its decimal and timestamp parsed (their text may differ:
    `12.5` and `12.50`, `+00:00` and `Z`)."""
    return {
        **answer,
        "price": Decimal(answer["price"]),
        "at": datetime.fromisoformat(answer["at"]),
    }


ADDRESS_SELECTION = "{ city zipCode geo { lat lon } }"
VALUES = (
    f"name count big ratio flag price at day status tags moods address {ADDRESS_SELECTION} "
    f"stops {{ city minutes }} note maybeAddress {ADDRESS_SELECTION} orderId added"
)


@dataclass(frozen=True)
class Written:
    """The keys written into one view's topic, as GraphQL arguments, with their truths."""

    view: View
    keys: list[Any]
    truths: list[Value]

    def expected(self) -> dict[str, Value]:
        """The answer of each key, by its JSON text."""
        return {
            json.dumps(key): _expected(t) for key, t in zip(self.keys, self.truths, strict=True)
        }


def _selection(view: View) -> str:
    """Every field of `view`'s type: its key's, then the value fields."""
    return f"{' '.join(key_names(view))} {VALUES}"


def _key(key_type: KeyType | RecordKey, index: int, rng: random.Random) -> Any:
    """The index-th key: the GraphQL argument (a Long as its digits)."""
    if isinstance(key_type, RecordKey):
        seq = _key(KeyType.LONG, index, rng)
        return {"shop": f"shop-{index % 7}-{_text(rng)}", "seq": seq, "lane": index % 5 - 2}
    if key_type is KeyType.STRING:
        return f"key-{index:04d}-{_text(rng)}"
    if key_type is KeyType.INT:
        return index * 35_791_393 - 2**31  # spread over every 32-bit int
    return str(index * 76_861_433_640_456_465 - 2**63)


def _kafka_key(key_type: KeyType | RecordKey, key: Any) -> Any:
    """The key as its serializer takes it (a Long argument is its digits)."""
    if isinstance(key_type, RecordKey):
        return {**key, "seq": int(key["seq"])}
    return int(key) if key_type is KeyType.LONG else key


def _answered_key(view: View, answer: Value) -> str:
    """The JSON text of the key an answer shows, as `Written.expected` names keys."""
    names = key_names(view)
    return json.dumps({n: answer[n] for n in names} if len(names) > 1 else answer[names[0]])


def _serializers(
    client: SchemaRegistryClient, view: View
) -> dict[int, Callable[[Value, SerializationContext], bytes | None]]:
    """Per schema version, what writes a value of `view`'s topic."""
    if view.value_format is ValueFormat.JSON:
        plain = _as_json_plain
        return {1: plain, 2: plain}
    conf = {"auto.register.schemas": False}
    if view.value_format is ValueFormat.AVRO:
        return {v: AvroSerializer(client, _avro_schema(v), conf=conf) for v in (1, 2)}
    if view.value_format is ValueFormat.PROTOBUF:
        return {v: _protobuf(client, v) for v in (1, 2)}
    json_serializers = {v: JSONSerializer(_json_schema(v), client, conf=conf) for v in (1, 2)}
    return {v: _iso_first(s) for v, s in json_serializers.items()}


def _as_json_plain(truth: Value, _: SerializationContext) -> bytes:
    return orjson.dumps(_as_json(truth, _ms))


def _protobuf(
    client: SchemaRegistryClient, version: int
) -> Callable[[Value, SerializationContext], bytes | None]:
    """Confluent's Protobuf serializer of the schema's `version`, given a truth."""
    message_class = _proto_class(version)
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    serialize = ProtobufSerializer(message_class, client, conf)

    def write(truth: Value, context: SerializationContext) -> bytes | None:
        fields = {k: v for k, v in _as_json(truth, _iso).items() if v is not None}
        return serialize(json_format.ParseDict(fields, message_class()), context)

    return write


def _iso_first(
    serialize: Callable[[Value, SerializationContext], bytes | None],
) -> Callable[[Value, SerializationContext], bytes | None]:
    return lambda truth, context: serialize(_as_json(truth, _iso), context)


def _register(client: SchemaRegistryClient) -> None:
    for view in CATALOGUE:
        if view.value_format is ValueFormat.PROTOBUF:  # its serializer registers itself
            context = SerializationContext(view.topic, MessageField.VALUE)
            for version in (1, 2):
                _protobuf(client, version)(_truth(random.Random(0), version), context)
        if view.value_format in _SCHEMAS:
            schema_type, schema_of = _SCHEMAS[view.value_format]
            for version in (1, 2):
                client.register_schema(view.subject, Schema(schema_of(version), schema_type))


def _produce(bootstrap: str, client: SchemaRegistryClient) -> list[Written]:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    written = []
    for index, view in enumerate(CATALOGUE):
        rng = random.Random(index)
        serializers = _serializers(client, view)
        context = SerializationContext(view.topic, MessageField.VALUE)
        keys, truths = [], []
        for number in range(KEYS_PER_VIEW):
            version = 1 if number < KEYS_PER_VIEW // 2 else 2
            key, truth = _key(view.key_type, number, rng), _truth(rng, version)
            kafka_key = view.key_type.serialize(_kafka_key(view.key_type, key))
            producer.produce(view.topic, serializers[version](truth, context), kafka_key)
            keys.append(key)
            truths.append(truth)
        written.append(Written(view, keys, truths))
    assert producer.flush(30) == 0, "records left undelivered"
    return written


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, list[Written]]]:
    base = Path(tmp_path_factory.mktemp("conformance"))
    with (
        SchemaRegistry(base / "registry") as registry,
        SchemaRegistryClient({"url": registry.url}) as client,
    ):
        _register(client)  # the pipeline reads every version at its start
        env = {
            **os.environ,
            "STATEFED_CATALOGUE": CATALOGUE_SPEC,
            "STATEFED_REGISTRY_URL": registry.url,
        }
        with LocalCluster(base, partitions=3, env=env, progress=print) as local:
            local.start_all(("m1",))
            running = Cluster(local)
            yield running, _produce(local.bootstrap, client)
            running.http.close()


_GRAPHQL_KEYS = {KeyType.STRING: "String", KeyType.INT: "Int", KeyType.LONG: "Long"}


def _key_type_name(view: View) -> str:
    """The GraphQL type of `view`'s key argument."""
    key_type = view.key_type
    return f"{view.type_name}Key" if isinstance(key_type, RecordKey) else _GRAPHQL_KEYS[key_type]


def _lookup(cluster: Cluster, written: Written) -> dict[str, Value | None]:
    """Every key's answer to one multi-key lookup, by the key's JSON text."""
    view = written.view
    query = (
        f"query($k: [{_key_type_name(view)}!]!) "
        f"{{ {view.many_field}({view.keys_arg}: $k) {{ {_selection(view)} }} }}"
    )
    answers = cluster.data(query, {"k": written.keys})[view.many_field]
    return {json.dumps(k): a for k, a in zip(written.keys, answers, strict=True)}


def _scan(cluster: Cluster, written: Written) -> dict[str, Value]:
    """Every row of the view, by its key's JSON text, from one scan page."""
    view = written.view
    page = f"first: {KEYS_PER_VIEW + 1}"
    query = f"{{ {view.scan_field}({page}) {{ edges {{ node {{ {_selection(view)} }} }} }} }}"
    edges = cluster.data(query)[view.scan_field]["edges"]
    return {_answered_key(view, edge["node"]): edge["node"] for edge in edges}


def _point(cluster: Cluster, written: Written, key: Any) -> Value | None:
    view = written.view
    query = (
        f"query($k: {_key_type_name(view)}!) "
        f"{{ {view.point_field}({view.key_field}: $k) {{ {_selection(view)} }} }}"
    )
    answer: Value | None = cluster.data(query, {"k": key})[view.point_field]
    return answer


def _mismatches(written: Written, answers: dict[str, Any]) -> list[str]:
    """What differs between `answers` and the truth, one line per key (empty: none)."""
    lines = []
    for key, expected in written.expected().items():
        answer = answers.get(key)
        if answer is None:
            lines.append(f"{written.view.name} {key}: no answer")
            continue
        keyed = key_names(written.view)
        got = _normalized({name: value for name, value in answer.items() if name not in keyed})
        if got != expected:
            differing = sorted(n for n in expected if got.get(n) != expected[n])
            lines.append(
                f"{written.view.name} {key}: "
                + ", ".join(f"{n} {got.get(n)!r} != {expected[n]!r}" for n in differing)
            )
        if _answered_key(written.view, answer) != key:
            shown = _answered_key(written.view, answer)
            lines.append(f"{written.view.name} {key}: answered as key {shown}")
    return lines


def _all_answered(cluster: Cluster, matrix: list[Written]) -> bool:
    return all(None not in _lookup(cluster, w).values() for w in matrix)


@pytest.fixture(scope="module")
def answered(matrix: tuple[Cluster, list[Written]]) -> tuple[Cluster, list[Written]]:
    cluster, written = matrix
    wait_until(
        lambda: _all_answered(cluster, written),
        ANSWER_TIMEOUT_S,
        f"every key of the {len(written)} views answered",
    )
    return cluster, written


_IDS = [view.name for view in CATALOGUE]


@pytest.mark.parametrize("index", range(len(CATALOGUE)), ids=_IDS)
def test_every_value_looked_up_equals_what_was_produced(
    answered: tuple[Cluster, list[Written]], index: int
) -> None:
    cluster, matrix = answered
    written = matrix[index]
    for read in ("from the nodes or the cache", "again, from the cache"):
        mismatches = _mismatches(written, _lookup(cluster, written))
        assert not mismatches, f"lookup {read}:\n" + "\n".join(mismatches[:5])


@pytest.mark.parametrize("index", range(len(CATALOGUE)), ids=_IDS)
def test_every_value_scanned_equals_what_was_produced(
    answered: tuple[Cluster, list[Written]], index: int
) -> None:
    cluster, matrix = answered
    mismatches = _mismatches(matrix[index], _scan(cluster, matrix[index]))
    assert not mismatches, "\n".join(mismatches[:5])


def test_a_point_lookup_answers_each_shape_of_every_view(
    answered: tuple[Cluster, list[Written]],
) -> None:
    cluster, matrix = answered
    for written in matrix:
        first, last = written.keys[0], written.keys[-1]  # a v1 record and a v2 record
        answers = {json.dumps(k): _point(cluster, written, k) for k in (first, last)}
        expected = {k: v for k, v in written.expected().items() if k in answers}
        mismatches = _mismatches(
            Written(written.view, [first, last], [written.truths[0], written.truths[-1]]), answers
        )
        assert not mismatches and len(expected) == 2, "\n".join(mismatches)
