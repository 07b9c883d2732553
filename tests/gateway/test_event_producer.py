"""The producer behind `produce` once the gateway closed it: a write asked during or after
shutdown is refused at once, naming why, instead of waiting for a delivery report that no
thread would serve (gateway.writes.producer)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.model.errors import ProduceError
from gateway.writes.producer import EventProducer

NOBODY = "127.0.0.1:1"  # no broker: a write fails after the producer's timeout
TIMEOUT_S = 1.0


def _write(producer: EventProducer) -> None:
    async def write() -> None:
        await asyncio.wait_for(producer.produce("words", "k", b"{}", 0), 10 * TIMEOUT_S)

    asyncio.run(write())


def test_a_write_after_a_close_is_refused_naming_the_shutdown() -> None:
    producer = EventProducer(NOBODY, TIMEOUT_S)
    # started, then timed out: a write the broker may have taken all the same
    with pytest.raises(ProduceError, match="timed out: the event may have been written all"):
        _write(producer)
    producer.close()
    with pytest.raises(ProduceError, match="the gateway is shutting down"):
        _write(producer)


def test_a_producer_closed_before_any_write_starts_none() -> None:
    producer = EventProducer(NOBODY, TIMEOUT_S)
    producer.close()
    with pytest.raises(ProduceError, match="the gateway is shutting down"):
        _write(producer)
    assert producer._producer is None
