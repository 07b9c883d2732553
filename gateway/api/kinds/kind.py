"""What a view kind provides in the gateway."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.api.fields import ViewFields
from gateway.config import GatewayConfig
from gateway.model.prices import Price
from schema import View

__all__ = ["GatewayKind", "no_example", "scan_example"]


def no_example(view: View) -> str | None:
    return None


def scan_example(view: View, fields: list[str]) -> str:
    """The first rows of `view` in key order, with `fields` of each: a query that answers
    whatever keys the view holds."""
    selected = "\n".join(f"        {name}" for name in fields)
    return (
        f"{{\n  {view.scan_field}(first: 5) {{\n    edges {{\n      node {{\n{selected}\n"
        "      }\n    }\n  }\n}\n"
    )


@dataclass(frozen=True)
class GatewayKind:
    """A kind in the gateway's API: `fields` builds a view's public fields (`gateway.api.fields`),
    `prices` what the view's root fields cost (`gateway.execute.limits`) by their GraphQL name, and
    `example` a query of the view for GraphiQL's guided first document."""

    fields: Callable[[View], ViewFields]
    prices: Callable[[View, GatewayConfig], dict[str, Price]]
    example: Callable[[View], str | None] = no_example
