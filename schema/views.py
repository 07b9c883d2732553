"""The view catalogue: every queryable view is one declarative entry.

The pipeline, the node stores, the node subgraph and the gateway schema are all derived
from these entries; adding a view of an existing kind is one entry here and no resolver
code.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

from schema.aggregates import (
    RANKED_TYPES,
    Aggregate,
    AggregateFunction,
    aggregate_fields,
    check_aggregates,
)
from schema.fieldtypes import ValueField
from schema.groups import check_group_by
from schema.keytypes import KeyType
from schema.names import ViewNames, check_view_names, view_names
from schema.recordkeys import RecordKey
from schema.windows import WindowSpec

__all__ = [
    "CATALOGUE",
    "DEMO_DOMAIN",
    "WORD_COUNTS",
    "PipelineMode",
    "SubjectStrategy",
    "ValueFormat",
    "View",
    "ViewKind",
    "view_by_name",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MAX_TOPIC = 249  # Kafka's longest topic name
_TOPIC = re.compile(rf"^[a-zA-Z0-9._-]{{1,{_MAX_TOPIC}}}$")
_FIELD = re.compile(r"^[a-z][A-Za-z0-9]*$")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # an OAuth scope-token (RFC 6749 3.3)
_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class ViewKind(enum.Enum):
    COUNT = "count"
    WINDOWED_COUNT = "windowed_count"
    LATEST = "latest"
    HISTORY = "history"
    AGGREGATE = "aggregate"
    WINDOWED_AGGREGATE = "windowed_aggregate"


class ValueFormat(enum.Enum):
    """How the values of a view's topic are written.

    `json`: a JSON object, as UTF-8. `avro`, `json_schema` and `protobuf`: the Confluent wire
    format (a zero byte, the writer schema's 4-byte id in the Schema Registry, then the Avro
    binary, the JSON text, or the message indexes and the Protobuf message), the schemas
    registered under the view's subject (`View.subject`).
    """

    JSON = "json"
    AVRO = "avro"
    JSON_SCHEMA = "json_schema"
    PROTOBUF = "protobuf"


class SubjectStrategy(enum.Enum):
    """How the producers name the subjects of a topic's value schemas in the registry:
    Confluent's subject name strategies.

    `topic_name` (TopicNameStrategy, the default): `<topic>-value`, one type per topic.
    `record_name` (RecordNameStrategy) and `topic_record_name` (TopicRecordNameStrategy):
    one subject per record type (`com.acme.Order`, `orders-com.acme.Order`), so a topic may
    carry several types; the view names its type's subject in `value_subject` and skips the
    values of the others (and tombstones, whose type nobody can tell).
    """

    TOPIC_NAME = "topic_name"
    RECORD_NAME = "record_name"
    TOPIC_RECORD_NAME = "topic_record_name"


class PipelineMode(enum.Enum):
    """How the pipeline runs a view's query (`pipeline.modes` says which views can run in
    Real-Time Mode).

    `real_time`: Spark's Real-Time Mode, which processes each record as it arrives and
    writes the changelog with Spark's Kafka sink (at least once: a node keeps a key's most
    advanced row, so a replay changes nothing). `micro_batch`: a micro-batch every trigger
    interval, written through the pipeline's own producer. `auto`: the pipeline's default
    for the view (`STATEFED_PIPELINE_MODE`).
    """

    AUTO = "auto"
    REAL_TIME = "real_time"
    MICRO_BATCH = "micro_batch"


@dataclass(frozen=True)
class _KindShape:
    """What a view of one kind must declare besides `point_field`, which every kind has."""

    many: bool = False  # a multi-key lookup field (`many_field`)
    top: bool = False  # a top-N field (`top_field`)
    window: bool = False  # a `window`
    aggregates: bool = False  # `aggregates`; only such a view may take `group_by`
    events: bool = False  # rows are events showing the `value_fields`
    pages: bool = False  # a key's events are read in pages, and as of a time (`<point>AsOf`)


# the one place the contract says what each kind needs
_SHAPES: dict[ViewKind, _KindShape] = {
    ViewKind.COUNT: _KindShape(many=True, top=True),
    ViewKind.WINDOWED_COUNT: _KindShape(top=True, window=True),
    ViewKind.LATEST: _KindShape(many=True, events=True),
    ViewKind.HISTORY: _KindShape(events=True, pages=True),
    ViewKind.AGGREGATE: _KindShape(many=True, top=True, aggregates=True),
    ViewKind.WINDOWED_AGGREGATE: _KindShape(top=True, window=True, aggregates=True),
}


@dataclass(frozen=True)
class View:
    """One queryable view over one keyed input topic.

    `key_field` names the entity key both as a GraphQL argument and as a field of the
    view's type (e.g. `word`); `type_name`, `point_field`, `many_field` and `top_field`
    are the GraphQL names the gateway and the node subgraph expose (`many_field` only for
    count, latest and aggregate, `top_field` only for count, windowed_count and aggregate);
    every view also has
    `scan_field`, its rows in key order, named from these, and count, windowed and
    aggregate views `totals_field`. The point field of
    a windowed view returns the key's windows in a time range; that of a history view a
    connection of events. `event_time_field` names the JSON value field holding the event
    time in ms since the epoch; None means the Kafka record timestamp. `value_fields` are
    the JSON value fields a latest or history view exposes. `scope` is the scope a token
    needs to read the view's fields at the gateway; None lets any caller it admits read them.

    `key_type` says how the topic's record keys are written (`schema.keytypes`); a
    `RecordKey` is a key of several fields (`schema.recordkeys`): the view's type shows
    each of them, the lookups take `key_field` as an input object of them, and federation
    finds an entity by all of them (`@key(fields: "region order")`).

    `group_by` names value fields whose values are an aggregate view's key instead of the
    record key (`schema.groups`): `key_type` then says which (a `RecordKey` of them for
    several) and the view's rows are keyed and partitioned by them.

    An aggregate view keeps per key the `aggregates` over its events (`schema.aggregates`):
    its type shows each result and the newest event time, like a latest view's event, and
    its top-N ranks keys by any numeric result. `value_fields` are then the fields the
    aggregates and `where` read. A windowed aggregate view keeps them per key and window
    (`window`, as a windowed_count view does): each window shows its events' count and
    the results, and its top-N per window ranks keys by the count or by a numeric result.
    `where`, on a view of any kind, is a Spark SQL predicate over the value fields by
    their GraphQL names (`status = 'PAID' AND amount > 0`): only the events it holds for
    are in the view; it is checked when the pipeline starts.

    `pipeline_mode` says whether the pipeline runs the view in Spark's Real-Time Mode or
    in micro-batches (`PipelineMode`); `auto` leaves it to the pipeline's setting.
    """

    name: str
    topic: str
    kind: ViewKind
    key_field: str
    type_name: str
    point_field: str
    many_field: str = ""
    top_field: str = ""
    event_time_field: str | None = None
    value_fields: tuple[ValueField, ...] = ()
    window: WindowSpec | None = None
    scope: str | None = None
    value_format: ValueFormat = ValueFormat.JSON
    value_subject: str | None = None
    key_type: KeyType | RecordKey = KeyType.STRING
    subject_strategy: SubjectStrategy = SubjectStrategy.TOPIC_NAME
    aggregates: tuple[Aggregate, ...] = ()
    where: str | None = None
    group_by: tuple[str, ...] = ()
    pipeline_mode: PipelineMode = PipelineMode.AUTO

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"view name {self.name!r} must match {_NAME.pattern}")
        if not _TYPE.match(self.type_name):
            raise ValueError(f"view {self.name}: type_name {self.type_name!r} is no type name")
        self._check_topics()
        for field in (self.key_field, self.point_field, *self._kind_fields()):
            if not _FIELD.match(field):
                raise ValueError(f"view {self.name}: {field!r} is no GraphQL field name")
        if self.scope is not None and not _SCOPE.match(self.scope):
            raise ValueError(f"view {self.name}: scope {self.scope!r} is no OAuth scope")
        if self.value_subject is not None and self.value_format is ValueFormat.JSON:
            raise ValueError(
                f"view {self.name}: value_subject {self.value_subject!r} is for a registry "
                f"format: set value_format (e.g. ValueFormat.AVRO), or drop value_subject"
            )
        if self.value_subject == "":
            raise ValueError(f"view {self.name}: value_subject must not be empty")
        if self.shares_topic and (
            self.value_subject is None or self.value_format is ValueFormat.JSON
        ):
            raise ValueError(
                f"view {self.name}: subject_strategy {self.subject_strategy.value} names one "
                f"subject per record type: set value_format to the registry format and "
                f"value_subject to the subject of the type the view reads (e.g. "
                f"'com.acme.Order')"
            )
        windowed = [kind.value for kind, shape in _SHAPES.items() if shape.window]
        if _SHAPES[self.kind].window != (self.window is not None):
            raise ValueError(
                f"view {self.name}: a window is needed by, and only by, {', '.join(windowed)}"
            )
        problem = None if self.window is None else self.window.problem()
        if problem is not None:
            raise ValueError(f"view {self.name}: window {problem}")
        self._check_aggregates()
        if self.group_by and not _SHAPES[self.kind].aggregates:
            raise ValueError(
                f"view {self.name}: group_by is for aggregate views, not {self.kind.value} ones"
            )
        if self.group_by:
            check_group_by(
                self.name,
                self.group_by,
                self.value_fields,
                self.key_field,
                self.key_type,
            )
        if self.where is not None and not self.where.strip():
            raise ValueError(
                f"view {self.name}: where must be a predicate, or None for every event"
            )
        check_view_names(self)

    def _check_topics(self) -> None:
        """The input and changelog topics' names are names Kafka takes."""
        if not _TOPIC.match(self.topic) or self.topic in (".", ".."):
            raise ValueError(
                f"view {self.name}: topic {self.topic!r} is no Kafka topic name: 1 to "
                f"{_MAX_TOPIC} of the letters a-z and A-Z, digits, '.', '_' and '-'"
            )
        if len(self.changelog_topic) > _MAX_TOPIC:
            raise ValueError(
                f"view {self.name}: the view's name is too long for its changelog topic "
                f"{self.changelog_topic!r} ({len(self.changelog_topic)} characters, Kafka "
                f"takes {_MAX_TOPIC}): shorten it to {_MAX_TOPIC - len('statefed..changelog')}"
                " characters or fewer"
            )

    def _check_aggregates(self) -> None:
        if _SHAPES[self.kind].aggregates:
            check_aggregates(self.name, self._type_fields, self.aggregates, self.value_fields)
            if not self.ranked_fields:
                raise ValueError(
                    f"view {self.name}: its top-N ranks keys by a numeric aggregate and it has "
                    f"none: add one, e.g. Aggregate('events', AggregateFunction.COUNT)"
                )
        elif self.aggregates:
            raise ValueError(
                f"view {self.name}: aggregates are for aggregate views: set "
                f"kind=ViewKind.AGGREGATE (or WINDOWED_AGGREGATE), or drop them"
            )

    @property
    def _type_fields(self) -> tuple[str, ...]:
        """The fields of the view's type besides its results: the key's, and a window's
        bounds and count or the newest event time."""
        if self.window is not None:
            return (*self.key_names, "start", "end", "count")
        return (*self.key_names, "eventTime")

    def _kind_fields(self) -> list[str]:
        shape, fields = _SHAPES[self.kind], []
        if shape.many or self.many_field:
            fields.append(self.many_field)
        if shape.top or self.top_field:
            fields.append(self.top_field)
        return fields

    @property
    def key_names(self) -> tuple[str, ...]:
        """The fields of the view's type that hold its key: `key_field`, or a record key's."""
        if isinstance(self.key_type, RecordKey):
            return self.key_type.names
        return (self.key_field,)

    @functools.cached_property  # on every changelog record a node applies, every row read
    def row_fields(self) -> tuple[ValueField, ...]:
        """The value fields of a row the view serves: an aggregate view's results (per
        window, when windowed), the event's `value_fields` a latest or history view shows,
        or none (a count's `value_fields` are only read by its `where`)."""
        if self.aggregates:
            return aggregate_fields(self.aggregates, self.value_fields)
        return self.value_fields if _SHAPES[self.kind].events else ()

    @functools.cached_property
    def ranked_fields(self) -> tuple[str, ...]:
        """The results of an aggregate view its top-N ranks keys by: the numeric ones."""
        return (
            tuple(f.name for f in self.row_fields if f.type in RANKED_TYPES)
            if self.aggregates
            else ()
        )

    @functools.cached_property
    def graphql_names(self) -> ViewNames:
        """The GraphQL types and root fields the view puts in the gateway's and the node's
        schemas, and the arguments of its key's lookups (`schema.names`)."""
        shape = _SHAPES[self.kind]
        return view_names(
            self,
            many=shape.many,
            top=shape.top,
            counted=not (shape.events or shape.aggregates or shape.window),
            pages=shape.pages,
        )

    @property
    def changelog_topic(self) -> str:
        return f"statefed.{self.name}.changelog"

    def partition_of(self, key: str, partitions: int) -> int:
        """The partition of the key whose key text is `key` among `partitions`: where the
        producer of the view's topic puts it (see schema.keytypes)."""
        return self.key_type.partition(key, partitions)

    @property
    def reads_value(self) -> bool:
        """Whether the view decodes its records' values: an event time or fields from them,
        or the type of each on a topic of several (else it reads keys and timestamps)."""
        return self.event_time_field is not None or bool(self.value_fields) or self.shares_topic

    @property
    def shares_topic(self) -> bool:
        """Whether the topic may carry values of other types than the view's
        (`SubjectStrategy`): they are skipped, not dead letters."""
        return self.subject_strategy is not SubjectStrategy.TOPIC_NAME

    @property
    def subject(self) -> str:
        """The Schema Registry subject of the topic's value schemas: `value_subject`, or
        `<topic>-value` (TopicNameStrategy)."""
        return self.value_subject or f"{self.topic}-value"

    @property
    def scan_field(self) -> str:
        """The connection over the whole view in key order: `all` and the multi-key field's
        name, or the point field's for kinds without one (`allWordCounts`,
        `allHostAccessWindows`, `allBookingHistory`)."""
        name = self.many_field or self.point_field
        return f"all{name[0].upper()}{name[1:]}"

    @property
    def as_of_field(self) -> str:
        """A history view's newest event at or before a time: `bookingHistoryAsOf`."""
        return f"{self.point_field}AsOf"

    @property
    def totals_field(self) -> str:
        """The view's totals (count, windowed and aggregate views): `wordCountTotals`."""
        return f"{self.type_name[0].lower()}{self.type_name[1:]}Totals"

    @property
    def keys_arg(self) -> str:
        """The argument of the multi-key lookup, e.g. `words` for key field `word`."""
        return f"{self.key_field}s"


WORD_COUNTS = View(
    name="word_counts",
    topic="words",
    kind=ViewKind.COUNT,
    key_field="word",
    type_name="WordCount",
    point_field="wordCount",
    many_field="wordCounts",
    top_field="topWords",
)

_TIMESTAMP = "timestamp"  # the demo domain's JSON values carry event time in ms here

# The demo domain of issue 3: page views per host and bookings per customer; and page views
# per host again as an aggregate view: views and the distinct pages seen.
DEMO_DOMAIN: tuple[View, ...] = (
    View(
        name="host_access",
        topic="pageviews",
        kind=ViewKind.COUNT,
        key_field="host",
        type_name="HostAccess",
        point_field="hostAccess",
        many_field="hostAccessMany",
        top_field="topHosts",
        event_time_field=_TIMESTAMP,
    ),
    View(
        name="host_access_per_minute",
        topic="pageviews",
        kind=ViewKind.WINDOWED_COUNT,
        key_field="host",
        type_name="HostAccessWindow",
        point_field="hostAccessWindows",
        top_field="topHostsPerMinute",
        event_time_field=_TIMESTAMP,
        window=WindowSpec(size_ms=60_000, grace_ms=30_000, retention_ms=24 * 3_600_000),
    ),
    View(
        name="last_booking",
        topic="bookings",
        kind=ViewKind.LATEST,
        key_field="customer",
        type_name="LastBooking",
        point_field="lastBooking",
        many_field="lastBookings",
        event_time_field=_TIMESTAMP,
        value_fields=(ValueField("trip"),),
    ),
    View(
        name="booking_history",
        topic="bookings",
        kind=ViewKind.HISTORY,
        key_field="customer",
        type_name="BookingEvent",
        point_field="bookingHistory",
        event_time_field=_TIMESTAMP,
        value_fields=(ValueField("trip"),),
    ),
    View(
        name="host_pages",
        topic="pageviews",
        kind=ViewKind.AGGREGATE,
        key_field="host",
        type_name="HostPages",
        point_field="hostPages",
        many_field="hostPagesMany",
        top_field="topHostsByPages",
        event_time_field=_TIMESTAMP,
        value_fields=(ValueField("path"),),
        aggregates=(
            Aggregate("views", AggregateFunction.COUNT),
            Aggregate("pages", AggregateFunction.COUNT_DISTINCT, "path"),
        ),
    ),
)

CATALOGUE: tuple[View, ...] = (WORD_COUNTS, *DEMO_DOMAIN)


def view_by_name(name: str, catalogue: tuple[View, ...] = CATALOGUE) -> View:
    for view in catalogue:
        if view.name == name:
            return view
    known = ", ".join(v.name for v in catalogue)
    raise KeyError(f"no view named {name!r} in the catalogue (known: {known})")
