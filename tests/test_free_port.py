"""`free_port` picks ports a part can bind, away from those the kernel hands out to
outgoing connections and to bind(0) (the ephemeral range), where another process could
take a port in the seconds before the part binds it."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from tooling import broker
from tooling.broker import free_port


def _ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_a_picked_port_is_below_the_ephemeral_range_and_bindable() -> None:
    low, _high = _ephemeral_range()
    ports = {free_port() for _ in range(50)}
    assert all(10_000 <= port < low for port in ports), sorted(ports)
    assert len(ports) > 40, "picks should spread over the range, not repeat"
    for port in list(ports)[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    free = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        used = taken.getsockname()[1]
        picks = iter([used - broker._LOWEST_PICKED, free - broker._LOWEST_PICKED])
        monkeypatch.setattr(broker, "secrets", SimpleNamespace(randbelow=lambda _n: next(picks)))
        monkeypatch.setattr(broker, "_GIVEN", set())  # `free` was given above
        assert free_port() == free


def test_a_port_given_before_is_not_given_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts pick their ports before any binds: the second of two equal random picks
    must not be handed out, though nothing has bound it yet."""
    first, other = free_port(), free_port()
    picks = iter([first - broker._LOWEST_PICKED, other - broker._LOWEST_PICKED])
    monkeypatch.setattr(broker, "secrets", SimpleNamespace(randbelow=lambda _n: next(picks)))
    monkeypatch.setattr(broker, "_GIVEN", {first})
    assert free_port() == other
