"""Monotonic reads with read tokens (issue #26): clients alternate between two gateways
(the cluster's and one of the test's own, both with their cache), each carrying the
newest `extensions.readToken` it got as `atLeast`, under produce load, through a SIGKILL
of a node and its restart. No client reads a key below what it read of it before."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.chaos.conftest import ChaosCluster, P, words
from tests.chaos.load import TruthProducer
from tests.chaos.test_chaos import LOAD_MAX_S, RATE_PER_S, _gateway
from tests.chaos.tokens import TokenSessions

pytestmark = pytest.mark.timeout(420)

TOKEN_READS = 10_000  # the count, over every session


def test_clients_alternating_gateways_with_their_read_token_never_read_backwards(
    chaos: ChaosCluster,
) -> None:
    local = chaos.local
    with _gateway(chaos, "tokens") as second:
        gateways = [local.gateway_url, second]
        chaos.wait_stable(second)
        asked = words("chaos-t")
        truth = TruthProducer(local.bootstrap, "words", asked, RATE_PER_S).start()
        sessions = TokenSessions(gateways, asked)
        run = sessions.run(LOAD_MAX_S, TOKEN_READS)
        runner = threading.Thread(target=asyncio.run, args=(run,), name="tokens")
        runner.start()
        marks: dict[str, float] = {}
        try:
            chaos.wait_stable(gateways[0])
            victim = chaos.live()[0]
            marks["kill"] = time.monotonic()
            local.nodes[victim].kill()
            marks["killed"] = chaos.wait_stable(gateways[0])
            local.start_node(victim)  # same id and state directory
            marks["back"] = chaos.wait_stable(gateways[0])
            chaos.wait_stable(second)
        finally:
            sessions.stop.set()  # the sessions go on until they made TOKEN_READS
            runner.join(LOAD_MAX_S)
            truth.stop()
    assert not runner.is_alive(), "the token sessions did not stop"
    print(
        f"read tokens over {len(gateways)} gateways: {sessions.answered} of {sessions.reads} "
        f"reads answered, {sessions.tokens_moved} moved the token; kill to stable "
        f"{marks['killed'] - marks['kill']:.1f} s, restart to stable "
        f"{marks['back'] - marks['killed']:.1f} s; failures {dict(sessions.failures)}"
    )
    assert not sessions.problems, sessions.problems[:5]
    assert not sessions.regressions, (
        f"{len(sessions.regressions)} reads below what their session read before, first: "
        f"{sessions.regressions[:5]}"
    )
    assert sessions.reads >= TOKEN_READS
    # the tokens moved with the produce load (each session's first read of a partition
    # moves it once, 48 in all), and the reads were answered, not refused
    assert sessions.tokens_moved >= 10 * sessions.sessions * P
    assert sessions.answered >= 0.95 * sessions.reads, dict(sessions.failures)
