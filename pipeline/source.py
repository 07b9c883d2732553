"""`statefed_kafka`: a Spark Python data source streaming one Kafka topic over confluent-kafka.

Offsets live in Spark's checkpoint as `{"<partition>": next_offset}`; end offsets come from
a fetched high watermark (see watermarks.py); a micro-batch's ranges are grouped into a
few read tasks. Options: `bootstrap`, `topic` (required), `startingOffsets` (earliest |
latest), `readTasks`, `maxOffsetsPerTrigger` (0 = no cap), `readTimeoutMs`, and
`kafka.<key>` for each librdkafka setting (`runtime.kafka.KafkaSettings.source_options`).
Columns are those of Spark's own Kafka connector: key, value, topic, partition, offset, timestamp,
timestampType.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipeline.errors import PipelineConfigError
from pipeline.offsets import (
    OffsetRange,
    cap_offsets,
    decode_offsets,
    encode_offsets,
    group_ranges,
    ranges_between,
)
from pipeline.reading import read_ranges
from pipeline.watermarks import WatermarkProbe
from runtime.config import ConfigError
from runtime.kafka import KafkaProperties, KafkaSettings

__all__ = [
    "KAFKA_SCHEMA",
    "SOURCE_NAME",
    "KafkaInputPartition",
    "KafkaSource",
    "KafkaStreamReader",
    "SourceOptions",
    "register_source",
]

SOURCE_NAME = "statefed_kafka"

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), False),
    ]
)


@dataclass(frozen=True)
class SourceOptions:
    """The reader's options, parsed from the strings Spark hands over."""

    bootstrap: str
    topic: str
    starting_offsets: str = "earliest"
    read_tasks: int = 2
    max_offsets_per_trigger: int = 0
    read_timeout_ms: int = 30_000
    # the `kafka.<key>` options: the user's librdkafka settings (TLS, SASL)
    kafka_properties: KafkaProperties = field(default_factory=KafkaProperties)

    @property
    def kafka(self) -> KafkaSettings:
        """The Kafka client settings of the source's consumers."""
        return KafkaSettings(self.bootstrap, self.kafka_properties)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceOptions:
        def require(name: str) -> str:
            value = options.get(name)
            if not value:
                raise PipelineConfigError(f"{SOURCE_NAME} option {name}", "is required")
            return value

        def integer(name: str, default: int, minimum: int) -> int:
            raw = options.get(name)
            try:
                value = default if raw is None else int(raw)
            except ValueError as exc:
                raise PipelineConfigError(
                    f"{SOURCE_NAME} option {name}", f"must be an integer, got {raw!r}"
                ) from exc
            if value < minimum:
                raise PipelineConfigError(
                    f"{SOURCE_NAME} option {name}", f"must be >= {minimum}, got {value}"
                )
            return value

        starting = options.get("startingOffsets", "earliest")
        if starting not in ("earliest", "latest"):
            raise PipelineConfigError(
                f"{SOURCE_NAME} option startingOffsets",
                f"must be earliest or latest, got {starting!r}",
            )
        return cls(
            bootstrap=require("bootstrap"),
            topic=require("topic"),
            starting_offsets=starting,
            read_tasks=integer("readTasks", 2, 1),
            max_offsets_per_trigger=integer("maxOffsetsPerTrigger", 0, 0),
            read_timeout_ms=integer("readTimeoutMs", 30_000, 1),
            kafka_properties=_kafka_properties(options),
        )


def _kafka_properties(options: Mapping[str, str]) -> KafkaProperties:
    values = tuple(sorted((k[6:], v) for k, v in options.items() if k.startswith("kafka.")))
    try:
        return KafkaProperties(values)
    except ConfigError as exc:
        raise PipelineConfigError(f"{SOURCE_NAME} option kafka.*", exc.problem) from exc


class KafkaInputPartition(InputPartition):
    """The offset ranges one read task consumes."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)


class KafkaSource(DataSource):
    """The data source Spark instantiates from `readStream.format("statefed_kafka")`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(SourceOptions.from_options(self.options))


class KafkaStreamReader(DataSourceStreamReader):
    """Plans micro-batches on the driver (one probe consumer) and reads them in tasks."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._probe: WatermarkProbe | None = None  # opened on first use, never pickled
        self._latest: dict[int, int] | None = None

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_probe": None}

    def _watermarks(self) -> WatermarkProbe:
        if self._probe is None:
            self._probe = WatermarkProbe(self.options.kafka, self.options.topic)
        return self._probe

    def initialOffset(self) -> dict[str, int]:
        probe = self._watermarks()
        if self.options.starting_offsets == "latest":
            return encode_offsets(probe.latest({}))
        return encode_offsets(probe.earliest())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger > 0:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        known = decode_offsets(start)
        self._latest = self._watermarks().latest(known)
        end = {p: max(e, known.get(p, 0)) for p, e in self._latest.items()}
        end.update({p: o for p, o in known.items() if p not in end})
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(known, end, limit.max_rows)
        return encode_offsets(end)

    def reportLatestOffset(self) -> dict[str, int] | None:
        return None if self._latest is None else encode_offsets(self._latest)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[KafkaInputPartition]:
        ranges = ranges_between(decode_offsets(start), decode_offsets(end))
        return [KafkaInputPartition(g) for g in group_ranges(ranges, self.options.read_tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        timeout_s = self.options.read_timeout_ms / 1000
        return read_ranges(self.options.kafka, self.options.topic, partition.ranges, timeout_s)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def register_source(spark: SparkSession) -> None:
    """Make `spark.readStream.format("statefed_kafka")` available in `spark`."""
    spark.dataSource.register(KafkaSource)
