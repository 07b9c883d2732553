"""The top-N of an aggregate view: the keys with the greatest value of one numeric result,
chosen by an enum of the view's numeric results (the first one by default).

```graphql
enum CustomerOrdersRanking { ORDERS REVENUE BASKET }
topCustomers(limit: Int! = 10, by: CustomerOrdersRanking! = ORDERS): [CustomerOrders!]!
# and the subscription of the same name, pushed when that top changes
topCustomers(limit: Int! = 10, by: CustomerOrdersRanking! = ORDERS, interval: Int! = 1000):
  CustomerOrdersTop!
```

Ties go to the smaller key; a key without a value of the result (no event had the field)
is in no ranking by it.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import enum
import functools
import re
from collections.abc import Callable
from typing import Any

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    MaxLag,
    authorize_view,
    read_options,
    record_failures,
)
from gateway.api.fields.live import top_subscription_field
from gateway.api.request import RequestContext
from schema import View

__all__ = ["ranked_top_field", "ranked_top_subscription", "ranking_enum", "ranking_name"]

_WORD = re.compile(r"(?<!^)(?=[A-Z])")


def ranking_name(field: str) -> str:
    """The enum value of a result named `field`: `avgBasket` -> `AVG_BASKET`."""
    return _WORD.sub("_", field).upper()


@functools.cache  # one enum per view: the query, the scan and the subscription share it
def ranking_enum(view: View) -> Any:
    """`<Type>Ranking`: an enum of `view`'s numeric results, each valued its name."""
    members = {ranking_name(name): name for name in view.ranked_fields}
    ranking = enum.Enum(f"{view.type_name}Ranking", members)  # type: ignore[misc]
    return strawberry.enum(
        ranking, description=f"The numeric results of view {view.name} a top-N ranks by."
    )


def ranked_top_field(view: View, row_type: Any, to_type: Callable[[Any], Any]) -> dict[str, Any]:
    """`view`'s top field, merged from every partition's top by the chosen result."""
    ranking = ranking_enum(view)
    first = next(iter(ranking))

    async def top(
        info: strawberry.Info,
        limit: int = 10,
        by: ranking = first,  # type: ignore[valid-type]
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[row_type]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        authorize_view(context, view)
        context.planner.check_top(view, limit, None)  # before atLeast's wait
        options = await read_options(context, view, max_lag, at_least)
        field: str = by.value  # type: ignore[attr-defined]
        result = await context.planner.top(view, limit, context.deadline, options=options, by=field)
        context.add_freshness(view, result.freshness)
        record_failures(context, info, result.failures)
        return [to_type(row) for row in result.rows]

    description = (
        f"The `limit` {view.keys_arg} of view {view.name} with the greatest value of the "
        f"result `by` (then {view.key_field} asc); a {view.key_field} without that result "
        f"is left out."
    )
    return {
        view.top_field: strawberry.field(resolver=top, name=view.top_field, description=description)
    }


def ranked_top_subscription(
    view: View, row_type: Any, to_type: Callable[[Any], Any]
) -> dict[str, Any]:
    """`view`'s top field as a subscription: the top by the chosen result, pushed when it
    changes."""
    return {view.top_field: top_subscription_field(view, row_type, to_type, ranking_enum(view))}
