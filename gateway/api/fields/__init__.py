"""The public schema's fields, generated from catalogue entries: one builder per view kind
(a module here, named by its kind in `gateway.api.kinds`; adding a view of an existing kind
needs no code), `cluster`, and federation's `_entities` over the views' entity types."""

from gateway.api.fields.cluster import cluster_field
from gateway.api.fields.common import (
    Entity,
    PageType,
    RowType,
    ScanType,
    TotalsType,
    ViewFields,
    attribute,
)
from gateway.api.fields.entities import resolve_entities
from gateway.api.fields.produce import produce_field

__all__ = [
    "Entity",
    "PageType",
    "RowType",
    "ScanType",
    "TotalsType",
    "ViewFields",
    "attribute",
    "cluster_field",
    "produce_field",
    "resolve_entities",
]
