"""The `produce` mutation: one event to an input topic of the catalogue, and the consistency
token of the write, for reads that must see it (`atLeast`): read-your-writes for demos,
tests and frontends that write through the gateway.

```graphql
produce(topic: String!, key: String!, value: JSON, eventTime: DateTime): Produced!
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations.
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import strawberry
from strawberry.scalars import JSON

from gateway.api.fields.common import authorize, given
from gateway.api.request import RequestContext
from gateway.model import inputs
from gateway.model.errors import BadRequestError, ProduceDisabledError
from gateway.model.timestamps import floor_ms
from gateway.writes.policy import check_event_time
from runtime.valuetypes import Long
from schema import KeyType, ValueFormat, View

__all__ = ["Produced", "produce_field"]


@strawberry.type(
    description="Where a produced event landed. Pass `token` as `atLeast` to a read that "
    "must see the event."
)
class Produced:
    topic: str
    partition: int
    offset: Long = strawberry.field(
        description="A 64-bit offset, as a string of decimal digits (a Long)."
    )
    token: str


def produce_field(catalogue: Iterable[View]) -> Any:
    """The mutation field writing to the input topics of `catalogue`'s views."""
    readers: dict[str, list[View]] = {}
    for view in catalogue:
        readers.setdefault(view.topic, []).append(view)

    async def produce(
        info: strawberry.Info,
        topic: str,
        key: str,
        value: JSON | None = strawberry.UNSET,
        event_time: Annotated[
            datetime | None, strawberry.argument(name="eventTime")
        ] = strawberry.UNSET,
    ) -> Produced:
        context: RequestContext = info.context
        if context.config.authenticates:
            authorize(context, context.config.produce_scope, "the produce mutation")
        if context.producer is None:  # the app makes none when STATEFED_GATEWAY_PRODUCE is off
            raise ProduceDisabledError()
        views = readers.get(topic)
        if views is None:
            raise BadRequestError(
                "produce", f"no view reads topic {topic!r}; topics: {', '.join(sorted(readers))}"
            )
        _check_writable(topic, views)
        config = context.config
        inputs.check_keys(views[0], [key], 1, config.max_key_bytes)
        now = context.clock()
        moment = _event_time(views, given(value), given(event_time), now)
        check_event_time(views, moment, now, config.produce_max_ahead_ms)
        body = _value(views, given(value), moment)
        _check_size(views[0], key, body, context.producer.max_record_bytes)
        if context.produce_rate is not None:  # last: a refused write spends no token
            context.produce_rate.take(context.principal.subject)
        token = await context.producer.produce(topic, key, body, moment)
        return Produced(
            topic=topic, partition=token.partition, offset=Long(token.offset), token=str(token)
        )

    return strawberry.mutation(
        resolver=produce,
        description="Write one event to an input topic of the views (value: a JSON object of "
        "the views' value fields; eventTime: default now, at most a few minutes ahead). "
        "Returns the write's consistency token. Off unless STATEFED_GATEWAY_PRODUCE=true.",
    )


def _check_writable(topic: str, views: list[View]) -> None:
    """BadRequestError when a view reads `topic` with typed keys or registry values: the
    mutation writes UTF-8 keys and JSON values, which that view would dead-letter. A
    grouped view's key is made of its value's fields: it reads no record key."""
    for view in views:
        typed_key = view.key_type is not KeyType.STRING and not view.group_by
        if typed_key or view.value_format is not ValueFormat.JSON:
            raise BadRequestError(
                view.name,
                f"topic {topic!r} is read with {view.key_type.value} keys and "
                f"{view.value_format.value} values; the produce mutation writes string keys and "
                f"JSON values only: write to it with the topic's own serializers",
            )


def _event_time(views: list[View], value: Any, moment: datetime | None, now_ms: int) -> int:
    """The write's event time: `eventTime`, or the event-time field a view reads from the
    value when the value carries it, or now. Given both ways, they must agree: the time the
    views read is the one the bounds check."""
    stated = _times_in_value(views, value)
    if moment is not None:
        if moment.tzinfo is None:
            raise BadRequestError(
                views[0].name, "eventTime needs a UTC offset, e.g. 2026-01-01T00:00:00Z"
            )
        try:
            stated["eventTime"] = floor_ms(moment.astimezone(UTC))
        except OverflowError as exc:
            raise BadRequestError(
                views[0].name, "eventTime is outside the years 1 to 9999 in UTC"
            ) from exc
    if len(set(stated.values())) > 1:
        given_as = ", ".join(f"{name} {ms}" for name, ms in stated.items())
        raise BadRequestError(
            views[0].name,
            f"the event time is given twice and differs ({given_as} ms): give it once, as "
            "eventTime or in the value",
        )
    return next(iter(stated.values()), now_ms)


def _times_in_value(views: list[View], value: Any) -> dict[str, int]:
    """The event times the value carries, by field (`value.<field>`), of the views that
    read the time from the value: each a whole number of epoch milliseconds."""
    times: dict[str, int] = {}
    if not isinstance(value, Mapping):
        return times
    for view in views:
        field = view.event_time_field
        if field is None or field not in value:
            continue
        ms = value[field]
        if isinstance(ms, float) and ms.is_integer():
            ms = int(ms)
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise BadRequestError(
                view.name,
                f"value.{field} is the event time of view {view.name}: epoch milliseconds as "
                f"a whole number, not {orjson.dumps(value[field]).decode()}; or leave it out "
                "and give eventTime",
            )
        times[f"value.{field}"] = ms
    return times


def _value(views: list[View], value: Any, event_ms: int) -> bytes:
    """The record value: the JSON object given, with the event-time field of the views that
    read the time from the value set to `event_ms`; empty when no view decodes the value."""
    if value is not None and not isinstance(value, Mapping):
        raise BadRequestError(views[0].name, "value must be a JSON object of the view's fields")
    document = dict(value or {})
    for view in views:
        if view.event_time_field is not None:
            document[view.event_time_field] = event_ms
    if not document and not any(v.reads_value for v in views):
        return b""
    try:
        return orjson.dumps(document)
    except orjson.JSONEncodeError as exc:  # an integer past 64 bits, which JSON readers lose
        raise BadRequestError(views[0].name, f"value cannot be written as JSON: {exc}") from exc


def _check_size(view: View, key: str, body: bytes, max_bytes: int) -> None:
    """BadRequestError for a record larger than the producer sends (it never would)."""
    size = len(key.encode()) + len(body)
    if size > max_bytes:
        raise BadRequestError(
            view.name,
            f"the record is {size} bytes (key and value), larger than the {max_bytes} the "
            "gateway's producer sends (message.max.bytes): write a smaller value",
        )
