"""The top-N of a view whose rows a node ranks by a numeric field (aggregate views): the
`limit` first keys by the field `by` descending, then key ascending.

```graphql
topCustomers(limit: Int!, by: String!, partitions: [Int!]): [CustomerOrders!]!
```

`by` is the field's GraphQL name; the gateway's public field takes it as an enum.
"""

# No `from __future__ import annotations`: the resolvers' annotations are built from
# catalogue entries at run time and strawberry must see the objects, not strings.

from collections.abc import Callable
from operator import methodcaller
from typing import Any

import strawberry
from strawberry.types.field import StrawberryField

from node.errors import BadRequestError
from node.subgraph.fields.common import check_limit, given, query_field, read_partitions
from node.subgraph.fields.context import context_of
from runtime.ranking import merge_top, value_rank
from schema import EventRow, View, WindowRow

__all__ = ["by_result", "check_ranked", "ranked_top_field"]


def by_result(by: str) -> Callable[[EventRow | WindowRow], Any]:
    """The order of rows ranked by their numeric result `by` (a store's rank index's)."""
    return lambda row: value_rank(row.fields[by], row.key)


def check_ranked(view: View, by: str) -> None:
    """BAD_USER_INPUT unless `by` names a numeric result of `view`."""
    if by not in view.ranked_fields:
        known = ", ".join(view.ranked_fields)
        raise BadRequestError(view.name, f"by must name a numeric result ({known}), got {by!r}")


def ranked_top_field(
    view: View, row_type: type, to_type: Callable[[EventRow], Any]
) -> dict[str, StrawberryField]:
    """`view`'s top field over the rows of this node's partitions, merged."""

    def top(
        info: strawberry.Info,
        limit: int,
        by: str,
        partitions: list[int] | None = strawberry.UNSET,
    ) -> list[row_type]:  # type: ignore[valid-type]
        check_limit(view, limit)
        check_ranked(view, by)
        reader = methodcaller("ranked", view.name, by, limit)
        tops = read_partitions(view, context_of(info), given(partitions), reader)
        return [to_type(row) for row in merge_top(tops, limit, by_result(by))]

    return {view.top_field: query_field(top, view.top_field)}
