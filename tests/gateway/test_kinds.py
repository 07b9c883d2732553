"""The gateway finds every kind's pieces in one table."""

from __future__ import annotations

from graphql import graphql_sync, parse, validate

from gateway.api.kinds import KINDS
from gateway.api.schema import build_schema
from gateway.config import GatewayConfig
from gateway.edge.app import _default_query, view_examples
from gateway.reads.kinds import view_queries
from schema import CATALOGUE, ViewKind


def test_every_kind_has_fields_documents_and_prices() -> None:
    assert set(KINDS) == set(ViewKind)
    config = GatewayConfig()
    for view in CATALOGUE:
        kind = KINDS[view.kind]
        parts = view_queries(view).documents
        assert any([parts.lookup, parts.top, parts.windows, parts.history]), view.name
        # every priced field is one of the view's fields
        assert set(kind.prices(view, config)) <= set(kind.fields(view).fields), view.name


def test_graphiql_opens_on_a_guide_to_one_valid_query_per_view() -> None:
    document = _default_query(CATALOGUE)
    assert document.startswith("# statefed: one GraphQL endpoint")
    guide = document[: document.index("\n{")].splitlines()
    # fits GraphiQL's editor beside its toolbar and answer pane, 1280 pixels wide
    assert max(map(len, guide)) <= 50, guide
    schema = build_schema(CATALOGUE)._schema
    parsed = parse(document)
    assert len(parsed.definitions) == 1 and not validate(schema, parsed)
    examples = view_examples(CATALOGUE)
    assert len(examples) == len(CATALOGUE) + 1  # every view, then the cluster
    for query in examples:
        assert not validate(schema, parse(query)), query
        assert query.splitlines()[1].strip() in document, query


def test_graphiql_docs_list_the_views_before_the_federation_fields() -> None:
    """Introspection (what GraphiQL's docs list) gives the Query fields in schema order."""
    schema = build_schema(CATALOGUE)._schema
    result = graphql_sync(schema, "{ __schema { queryType { fields { name } } } }")
    assert result.errors is None, result.errors
    assert result.data is not None
    names = [f["name"] for f in result.data["__schema"]["queryType"]["fields"]]
    assert names[-2:] == ["_entities", "_service"], names
    assert names[0] == CATALOGUE[0].point_field, names
