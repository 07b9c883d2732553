"""The subgraph's fields, one builder per view kind, what the builders share, and
federation's `_entities` over the entity types of count, latest and aggregate views."""

from node.subgraph.fields.context import ReadContext
from node.subgraph.fields.count import count_fields
from node.subgraph.fields.entities import Entity, ViewFields, resolve_entities
from node.subgraph.fields.history import history_fields
from node.subgraph.fields.latest import latest_fields
from node.subgraph.fields.windowed import windowed_fields

__all__ = [
    "Entity",
    "ReadContext",
    "ViewFields",
    "count_fields",
    "history_fields",
    "latest_fields",
    "resolve_entities",
    "windowed_fields",
]
