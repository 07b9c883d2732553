"""The gateway app starts its feed hub with the app and stops it with the app: a subscription
through the app's schema and request context gets its rows, and ends with an error that
says why when the gateway shuts down."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from graphql import ExecutionResult, parse, subscribe

from gateway.api.responses import gateway_extensions
from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.model.principal import ANONYMOUS
from tests.gateway.fakes import WORDS, Model, fake_nodes, running_gateway
from tests.live.fake_feed import Changelog, FakeFeedNode, count_row
from tests.live.test_hub import P, keys_in, record, table
from tests.live.test_subscription_fields import take

pytestmark = pytest.mark.timeout(60)


def test_the_apps_subscriptions_follow_its_nodes_and_end_when_it_shuts_down() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        log.append(key, count_row(key, 4))
        node = await FakeFeedNode("n1", log, range(P)).start()
        app = GatewayApp(
            GatewayConfig(),
            feed=RoutingFeed(table(record(node, [0, 1]))),
            statuses=StatusBoard(),
            catalogue=(WORDS,),
        )
        await app.startup()
        try:
            started = subscribe(
                app._schema._schema,
                parse("subscription($w: String!) { wordCount(word: $w) { word count } }"),
                context_value=app._context(ANONYMOUS),
                variable_values={"w": key},
            )
            results = await started if inspect.isawaitable(started) else started
            assert not isinstance(results, ExecutionResult), results
            assert await take(results, 1) == [{"wordCount": {"word": key, "count": 4}}]
            await app.shutdown()
            last = await anext(results)
            assert last.errors is not None
            assert gateway_extensions(last.errors[0].original_error) == {  # type: ignore[arg-type]
                "code": "SUBSCRIPTIONS_UNAVAILABLE"
            }
            assert "shutting down: resume with your token" in last.errors[0].message
            with pytest.raises(StopAsyncIteration):
                await anext(results)
        finally:
            await app.shutdown()
            await node.stop()

    asyncio.run(scenario())


def test_a_subscription_posted_for_a_json_answer_is_refused_with_the_transports_to_use() -> None:
    async def scenario() -> None:
        nodes = fake_nodes(Model.of_counts({"kafka": 1}), P, 1)
        async with running_gateway(nodes, P) as client:
            query = 'subscription { wordCount(word: "kafka") { word count } }'
            response = await client.post("/graphql", json={"query": query})
            assert response.status_code == 400
            (error,) = response.json()["errors"]
            assert error["extensions"]["code"] == "BAD_REQUEST"
            assert "graphql-transport-ws" in error["message"]
            assert "text/event-stream" in error["message"]
            assert nodes[0].requests == 0

    asyncio.run(scenario())
