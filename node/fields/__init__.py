"""The subgraph's fields, one builder per view kind, and what the builders share."""

from node.fields.context import ReadContext
from node.fields.count import count_fields
from node.fields.history import history_fields
from node.fields.latest import latest_fields
from node.fields.windowed import windowed_fields

__all__ = ["ReadContext", "count_fields", "history_fields", "latest_fields", "windowed_fields"]
