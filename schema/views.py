"""The view catalogue: every queryable view is one declarative entry.

The pipeline, the node stores, the node subgraph and the gateway schema are all derived
from these entries; adding a view of an existing kind is one entry here and no resolver
code.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = ["CATALOGUE", "View", "ViewKind", "view_by_name"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_FIELD = re.compile(r"^[a-z][A-Za-z0-9]*$")
_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class ViewKind(enum.Enum):
    COUNT = "count"
    WINDOWED_COUNT = "windowed_count"
    LATEST = "latest"
    HISTORY = "history"


@dataclass(frozen=True)
class View:
    """One queryable view over one keyed input topic.

    `key_field` names the entity key both as a GraphQL argument and as a field of the
    view's type (e.g. `word`); `type_name`, `point_field`, `many_field` and `top_field`
    are the GraphQL names the gateway and the node subgraph expose.
    """

    name: str
    topic: str
    kind: ViewKind
    key_field: str
    type_name: str
    point_field: str
    many_field: str
    top_field: str

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"view name {self.name!r} must match {_NAME.pattern}")
        if not _TYPE.match(self.type_name):
            raise ValueError(f"view {self.name}: type_name {self.type_name!r} is no type name")
        for field in (self.key_field, self.point_field, self.many_field, self.top_field):
            if not _FIELD.match(field):
                raise ValueError(f"view {self.name}: {field!r} is no GraphQL field name")

    @property
    def changelog_topic(self) -> str:
        return f"statefed.{self.name}.changelog"

    @property
    def keys_arg(self) -> str:
        """The argument of the multi-key lookup, e.g. `words` for key field `word`."""
        return f"{self.key_field}s"


CATALOGUE: tuple[View, ...] = (
    View(
        name="word_counts",
        topic="words",
        kind=ViewKind.COUNT,
        key_field="word",
        type_name="WordCount",
        point_field="wordCount",
        many_field="wordCounts",
        top_field="topWords",
    ),
)


def view_by_name(name: str, catalogue: tuple[View, ...] = CATALOGUE) -> View:
    for view in catalogue:
        if view.name == name:
            return view
    known = ", ".join(v.name for v in catalogue)
    raise KeyError(f"no view named {name!r} in the catalogue (known: {known})")
