"""A node's `/health` stays open for probes, but with a metrics token set, the text of its
failure and store errors, and where damaged stores were moved, which name its files, are
for callers presenting that token only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from tests.gateway.fakes import WORDS

TOKEN = "t" * 40


def _healths(environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A failed node's /health without and with the metrics token."""
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1", **environ})
    app = NodeApp(config, [WORDS], registry=PartitionRegistry("n1"))
    app.metrics_guard.load()
    app.failure = OSError("cannot open /var/lib/statefed/n1/word_counts/partition-3")

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as http:
            anyone = await http.get("/health")
            operator = await http.get("/health", headers={"authorization": f"Bearer {TOKEN}"})
            assert anyone.status_code == operator.status_code == 503
            return anyone.json(), operator.json()

    return asyncio.run(scenario())


def test_with_a_metrics_token_only_its_holder_sees_the_failures_text(tmp_path: Path) -> None:
    token = tmp_path / "metrics.token"
    token.write_text(TOKEN)
    anyone, operator = _healths({"STATEFED_METRICS_TOKEN_FILE": str(token)})
    assert anyone["state"] == operator["state"] == "FAILED"
    assert "/var/lib" not in str(anyone) and "hidden" in anyone["error"]
    assert "/var/lib/statefed/n1" in operator["error"]


def test_without_a_metrics_token_health_shows_everything_as_metrics_does() -> None:
    anyone, _ = _healths({})
    assert "/var/lib/statefed/n1" in anyone["error"]
