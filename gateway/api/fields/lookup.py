"""The point and multi-key lookup fields of a view whose type is an entity (count and
latest views): keys are checked once, here, then batched per request and owning node by
the request's loader.

```graphql
wordCount(word: String!, maxLag: Int, atLeast: String): WordCount
wordCounts(words: [String!]!, maxLag: Int, atLeast: String): [WordCount]!
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import strawberry

from gateway.api.fields.common import AtLeast, MaxLag, authorize_view, read_options, record_missing
from gateway.api.fields.keys import key_annotation, key_texts
from gateway.api.request import KeyResult, RequestContext
from gateway.model.rows import Event, Row
from schema import View

__all__ = ["lookup_fields"]


async def _load(
    info: strawberry.Info,
    view: View,
    keys: Sequence[str],
    max_lag: int | None,
    at_least: str | None,
) -> list[KeyResult]:
    context: RequestContext = info.context
    authorize_view(context, view)
    context.planner.check_keys(view, keys)
    options = await read_options(context, view, max_lag, at_least)
    results = await context.loader(view, options).load_many(keys)
    record_missing(context, info, results)
    return results


def lookup_fields(
    view: View,
    row_type: Any,
    to_type: Callable[[Row | Event | None], Any],
    point_description: str,
    many_description: str,
) -> dict[str, Any]:
    """`view.point_field` (one key, null if unknown) and `view.many_field` (several keys, in
    the order asked), answering instances of `row_type` made by `to_type`."""

    key_arg = key_annotation(view)

    async def point(
        info: strawberry.Info,
        key: Annotated[key_arg, strawberry.argument(name=view.key_field)],  # type: ignore[valid-type]
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> row_type | None:  # type: ignore[valid-type]
        (result,) = await _load(info, view, key_texts(view, [key]), max_lag, at_least)
        return to_type(result.row)

    async def many(
        info: strawberry.Info,
        keys: Annotated[list[key_arg], strawberry.argument(name=view.keys_arg)],  # type: ignore[valid-type]
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[row_type | None]:  # type: ignore[valid-type]
        texts = key_texts(view, keys)
        return [to_type(r.row) for r in await _load(info, view, texts, max_lag, at_least)]

    return {
        view.point_field: strawberry.field(
            resolver=point, name=view.point_field, description=point_description
        ),
        view.many_field: strawberry.field(
            resolver=many, name=view.many_field, description=many_description
        ),
    }
