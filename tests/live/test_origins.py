"""Which browser origins may open a WebSocket to the gateway (`origin_allowed`)."""

from __future__ import annotations

import pytest

from gateway.cors import CorsPolicy
from gateway.edge.ws import origin_allowed

HOST = b"gateway.example:8100"


@pytest.mark.parametrize(
    ("origins", "origin", "allowed"),
    [
        ((), None, True),  # not a browser: no ambient credentials ride along
        ((), b"http://gateway.example:8100", True),  # the gateway's own page (GraphiQL)
        ((), b"https://gateway.example:8100", True),  # the same, behind a TLS proxy
        ((), b"https://gateway.example", False),  # another port is another origin
        ((), b"http://evil.example", False),
        ((), b"http://gateway.example:8100.evil.example", False),
        (("https://app.example",), b"https://app.example", True),
        (("https://app.example",), b"https://app.example:8443", False),
        (("https://app.example",), b"http://app.example", False),
        (("*",), b"http://anything.example", True),
    ],
)
def test_origin_allowed(origins: tuple[str, ...], origin: bytes | None, allowed: bool) -> None:
    assert origin_allowed(CorsPolicy(origins), origin, HOST) is allowed


def test_no_host_header_means_no_own_origin() -> None:
    assert not origin_allowed(CorsPolicy(()), b"http://gateway.example:8100", None)
