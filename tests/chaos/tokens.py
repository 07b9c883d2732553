"""Clients carrying a read token: each session alternates between gateways, passes the
newest `extensions.readToken` it got as `atLeast` and keeps the one its answer returns.
Monotonic reads (issue #26) mean no session ever reads a key below what it read of that
key before, whichever gateway and copy answer."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tooling.processes import client_tls

READ = "query($w: String!, $t: String) { wordCount(word: $w, atLeast: $t) { word count } }"


@dataclass(frozen=True)
class Regression:
    session: int
    key: str
    before: int  # what the session read of the key before
    now: int
    gateway: str
    freshness: list[dict[str, Any]]


@dataclass
class TokenSessions:
    """`sessions` clients reading `words` through `gateways` in turn until `stop`, each
    with its read token; every answer is judged as it arrives."""

    gateways: list[str]
    words: list[str]
    sessions: int = 8
    stop: threading.Event = field(default_factory=threading.Event)
    reads: int = 0
    answered: int = 0
    tokens_moved: int = 0  # answers whose token differed from the one passed
    failures: Counter[str] = field(default_factory=Counter)  # error code / reason
    regressions: list[Regression] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    async def run(self, max_s: float, at_least_reads: int) -> None:
        """Until `stop` is set and `at_least_reads` were made, or `max_s` passed."""
        until = time.monotonic() + max_s
        async with httpx.AsyncClient(timeout=30.0, trust_env=False, verify=client_tls()) as http:
            await asyncio.gather(
                *(self._session(http, i, until, at_least_reads) for i in range(self.sessions))
            )

    async def _session(
        self, http: httpx.AsyncClient, index: int, until: float, at_least_reads: int
    ) -> None:
        rng = random.Random(index)
        token: str | None = None
        seen: dict[str, int] = {}
        turn = index
        while time.monotonic() < until and not (
            self.stop.is_set() and self.reads >= at_least_reads
        ):
            gateway = self.gateways[turn % len(self.gateways)]
            turn += 1
            word = rng.choice(self.words)
            token = await self._read(http, index, gateway, word, token, seen)

    async def _read(
        self,
        http: httpx.AsyncClient,
        index: int,
        gateway: str,
        word: str,
        token: str | None,
        seen: dict[str, int],
    ) -> str | None:
        """One read of `word` through `gateway` passing `token`; the token to carry on."""
        self.reads += 1
        request = {"query": READ, "variables": {"w": word, "t": token}}
        try:
            response = await http.post(gateway, json=request)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.failures[type(exc).__name__] += 1
            await asyncio.sleep(0.05)  # a gateway that does not answer: not a busy loop
            return token
        errors = body.get("errors") or []
        if errors:
            extensions = errors[0].get("extensions") or {}
            self.failures[f"{extensions.get('code')}/{extensions.get('reason')}"] += 1
            return token
        row = (body.get("data") or {}).get("wordCount")
        extensions = body.get("extensions") or {}
        newer = extensions.get("readToken")
        if not isinstance(newer, str):
            self.problems.append(f"an answer without a read token: {body}")
            return token
        count = 0 if row is None else row["count"]
        before = seen.get(word, 0)
        if count < before:
            freshness = extensions.get("freshness", [])
            self.regressions.append(Regression(index, word, before, count, gateway, freshness))
        seen[word] = max(before, count)
        self.answered += 1
        self.tokens_moved += newer != token
        return newer
