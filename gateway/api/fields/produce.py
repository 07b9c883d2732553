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
from schema import KeyType, ValueFormat, View

__all__ = ["Produced", "produce_field"]


@strawberry.type(
    description="Where a produced event landed. Pass `token` as `atLeast` to a read that "
    "must see the event."
)
class Produced:
    topic: str
    partition: int
    offset: int
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
        moment = _event_time(views[0], given(event_time), now)
        check_event_time(views, moment, now, config.produce_max_ahead_ms)
        body = _value(views, given(value), moment)
        if context.produce_rate is not None:  # last: a refused write spends no token
            context.produce_rate.take(context.principal.subject)
        token = await context.producer.produce(topic, key, body, moment)
        return Produced(
            topic=topic, partition=token.partition, offset=token.offset, token=str(token)
        )

    return strawberry.mutation(
        resolver=produce,
        description="Write one event to an input topic of the views (value: a JSON object of "
        "the views' value fields; eventTime: default now, at most a few minutes ahead). "
        "Returns the write's consistency token. Off unless STATEFED_GATEWAY_PRODUCE=true.",
    )


def _check_writable(topic: str, views: list[View]) -> None:
    """BadRequestError when a view reads `topic` with typed keys or registry values: the
    mutation writes UTF-8 keys and JSON values, which that view would dead-letter."""
    for view in views:
        if view.key_type is not KeyType.STRING or view.value_format is not ValueFormat.JSON:
            raise BadRequestError(
                view.name,
                f"topic {topic!r} is read with {view.key_type.value} keys and "
                f"{view.value_format.value} values; the produce mutation writes string keys and "
                f"JSON values only: write to it with the topic's own serializers",
            )


def _event_time(view: View, moment: datetime | None, now_ms: int) -> int:
    if moment is None:
        return now_ms
    if moment.tzinfo is None:
        raise BadRequestError(view.name, "eventTime needs a UTC offset, e.g. 2026-01-01T00:00:00Z")
    return floor_ms(moment.astimezone(UTC))


def _value(views: list[View], value: Any, event_ms: int) -> bytes:
    """The record value: the JSON object given, plus the event-time field of the views that
    read the time from the value; empty when no view decodes the value."""
    if value is not None and not isinstance(value, Mapping):
        raise BadRequestError(views[0].name, "value must be a JSON object of the view's fields")
    document = dict(value or {})
    for view in views:
        if view.event_time_field is not None:
            document.setdefault(view.event_time_field, event_ms)
    decodes = any(v.value_fields or v.event_time_field for v in views)
    if not document and not decodes:
        return b""
    return orjson.dumps(document)
