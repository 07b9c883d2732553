"""Which fields of a strawberry schema are plain attributes: what execution reads of an
object for them is `getattr(obj, python_name)`, so a fast path may read that value from
wherever the object's attribute came from (the gateway's and the node's lookups)."""

from __future__ import annotations

from graphql import GraphQLField
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.field import StrawberryField

__all__ = ["plain_attribute"]


def plain_attribute(field: GraphQLField) -> str | None:
    """The attribute execution reads for `field` with getattr, when it is strawberry's plain
    field (no resolver, permission or extension of its own, the default resolver getattr);
    else None."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    if not isinstance(definition, StrawberryField) or not definition.is_basic_field:
        return None
    if definition.default_resolver is not getattr:
        return None
    return definition.python_name
