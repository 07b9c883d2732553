"""The gateway finds every kind's pieces in one table."""

from __future__ import annotations

from gateway.app import _default_query
from gateway.config import GatewayConfig
from gateway.kinds import KINDS, view_queries
from schema import CATALOGUE, DEMO_DOMAIN, ViewKind


def test_every_kind_has_fields_documents_and_prices() -> None:
    assert set(KINDS) == set(ViewKind)
    config = GatewayConfig()
    for view in CATALOGUE:
        kind = KINDS[view.kind]
        parts = view_queries(view).documents
        assert any([parts.lookup, parts.top, parts.windows, parts.history]), view.name
        # every priced field is one of the view's fields
        assert set(kind.prices(view, config)) <= set(kind.fields(view).fields), view.name


def test_graphiql_starts_with_the_first_view_whose_kind_has_an_example() -> None:
    assert _default_query(CATALOGUE).startswith("{\n  topWords(limit: 10) {\n    word\n")
    latest_and_history = [v for v in DEMO_DOMAIN if v.top_field == ""]
    assert "cluster" in _default_query(latest_and_history)
