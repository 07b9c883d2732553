"""The public schema's fields, generated from catalogue entries: one builder per view kind
(adding a view of an existing kind needs no code), `cluster`, and federation's
`_entities` over the views' entity types."""

from collections.abc import Callable

from gateway.fields.cluster import cluster_field
from gateway.fields.common import Entity, ViewFields
from gateway.fields.count import count_fields
from gateway.fields.entities import resolve_entities
from gateway.fields.history import history_fields
from gateway.fields.latest import latest_fields
from gateway.fields.produce import produce_field
from gateway.fields.windowed import windowed_fields
from schema import View, ViewKind

__all__ = [
    "BUILDERS",
    "Entity",
    "ViewFields",
    "cluster_field",
    "produce_field",
    "resolve_entities",
]

BUILDERS: dict[ViewKind, Callable[[View], ViewFields]] = {
    ViewKind.COUNT: count_fields,
    ViewKind.WINDOWED_COUNT: windowed_fields,
    ViewKind.LATEST: latest_fields,
    ViewKind.HISTORY: history_fields,
}
