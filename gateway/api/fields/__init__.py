"""The public schema's fields, generated from catalogue entries: one builder per view kind
(a module here, named by its kind in `gateway.kinds`; adding a view of an existing kind
needs no code), `cluster`, and federation's `_entities` over the views' entity types."""

from gateway.fields.cluster import cluster_field
from gateway.fields.common import Entity, ViewFields
from gateway.fields.entities import resolve_entities
from gateway.fields.produce import produce_field

__all__ = [
    "Entity",
    "ViewFields",
    "cluster_field",
    "produce_field",
    "resolve_entities",
]
