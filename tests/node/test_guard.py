"""The call guard of a node without the cluster secret (node.replication.trust): calls pass
untouched, logged with their caller and request id only when DEBUG asks for it; a node that needs
the secret answers 503 until it has read it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from node.replication.trust import CallGuard
from runtime.graphql_http import RequestError

_SCOPE = {
    "method": "POST",
    "path": "/graphql",
    "headers": [(b"statefed-caller", b"gateway"), (b"statefed-request-id", b"g-7")],
}


async def _receive() -> Any:
    raise AssertionError("an open guard does not read the body")


def test_an_open_guard_admits_calls_and_logs_them_only_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = CallGuard("n1", "n1-1", False, 1 << 20)
    with caplog.at_level(logging.INFO, logger="node.replication.trust"):
        assert asyncio.run(guard.admit(_SCOPE, _receive)) is _receive
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="node.replication.trust"):
        assert asyncio.run(guard.admit(_SCOPE, _receive)) is _receive
        guard.admit_handshake(_SCOPE)
    assert [r.getMessage() for r in caplog.records] == [
        "call 'g-7' from caller 'gateway' (not checked)"
    ] * 2


def test_a_guard_that_needs_the_secret_refuses_calls_until_it_is_armed() -> None:
    guard = CallGuard("n1", "n1-1", True, 1 << 20)
    with pytest.raises(RequestError) as refused:
        asyncio.run(guard.admit(_SCOPE, _receive))
    assert refused.value.status == 503
    with pytest.raises(RequestError):
        guard.admit_handshake(_SCOPE)
