"""What a root field costs (`gateway.execute.limits`): each kind prices its fields
(`gateway.api.kinds`) from these."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import GatewayConfig
from schema import View

__all__ = ["DEFAULT_SCAN_PAGE", "ONE", "Price", "keys_price", "scan_price", "top_price"]

DEFAULT_SCAN_PAGE = 100  # a page of a whole-view scan without `first` or `last`


@dataclass(frozen=True)
class Price:
    """How a root field's cost is counted: the size its `argument` asks for (or, when it
    is given, its `alternative`: `last` for `first`), clamped to 1..`bound`, else `fixed`
    (also when neither is given and the schema has no default); times the view's partition
    count when it fans out."""

    view: View | None = None
    argument: str | None = None
    bound: int | None = None
    fixed: int = 1
    fanout: bool = False
    alternative: str | None = None


ONE = Price()  # any field not priced otherwise


def keys_price(view: View, config: GatewayConfig) -> Price:
    """A multi-key lookup reads its keys."""
    return Price(view, view.keys_arg, config.max_lookup_keys)


def top_price(view: View, config: GatewayConfig) -> Price:
    """A top-N reads `limit` rows of every partition."""
    return Price(view, "limit", config.max_top_limit, fanout=True)


def scan_price(view: View, config: GatewayConfig) -> Price:
    """A page of a whole-view scan reads one more row than the page of every partition."""
    return Price(
        view,
        "first",
        config.max_scan_page,
        fixed=DEFAULT_SCAN_PAGE,
        fanout=True,
        alternative="last",
    )
