"""Views reading one topic read its records alike.

A topic's records have one key format and one value format (and, for a registry format
under TopicNameStrategy, one subject), whatever views read them. Two views of one topic
that declare them differently would each dead-letter the records the other reads well, so
a catalogue where they do is refused when it is loaded. Only views that read the part
count: a grouped view reads no record key (its key is made of value fields), and a view
that reads nothing of the value (a count on the Kafka timestamp) takes any value.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from schema.views import ValueFormat, View

__all__ = ["check_shared_topics"]


def check_shared_topics(views: Sequence[View]) -> None:
    """ValueError naming two views that read one topic's keys or values differently."""
    by_topic: dict[str, list[View]] = {}
    for view in views:
        by_topic.setdefault(view.topic, []).append(view)
    for readers in by_topic.values():
        keyed = [v for v in readers if not v.group_by]
        _agree(keyed, lambda v: v.key_type, "key_type", "record keys")
        valued = [v for v in readers if v.reads_value]
        _agree(valued, lambda v: v.value_format, "value_format", "values")
        subjects = [v for v in valued if v.value_format is not ValueFormat.JSON]
        one_type = [v for v in subjects if not v.shares_topic]
        _agree(one_type, lambda v: v.subject, "value_subject", "value schemas' subject")


def _agree(
    views: Sequence[View], declared: Callable[[View], object], setting: str, what: str
) -> None:
    if not views:
        return
    first = views[0]
    for other in views[1:]:
        if declared(other) != declared(first):
            raise ValueError(
                f"views {first.name} and {other.name} both read topic {first.topic!r}, with "
                f"other {what} ({setting} {_shown(declared(first))} and "
                f"{_shown(declared(other))}): a topic's records are written one way, so each "
                f"view would dead-letter what the other reads; declare the same {setting}"
            )


def _shown(value: object) -> str:
    """`value` as a catalogue declares it: `KeyType.LONG`, `ValueFormat.AVRO`, `'orders'`."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)
