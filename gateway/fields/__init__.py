"""The public schema's fields, generated from catalogue entries: one builder per view kind
(adding a view of an existing kind needs no code), plus `cluster`."""

from collections.abc import Callable
from typing import Any

from gateway.fields.cluster import cluster_field
from gateway.fields.count import count_fields
from gateway.fields.history import history_fields
from gateway.fields.latest import latest_fields
from gateway.fields.windowed import windowed_fields
from schema import View, ViewKind

__all__ = ["BUILDERS", "cluster_field"]

BUILDERS: dict[ViewKind, Callable[[View], dict[str, Any]]] = {
    ViewKind.COUNT: count_fields,
    ViewKind.WINDOWED_COUNT: windowed_fields,
    ViewKind.LATEST: latest_fields,
    ViewKind.HISTORY: history_fields,
}
