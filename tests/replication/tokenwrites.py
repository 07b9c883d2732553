"""Writes through the gateway's `produce` mutation, each acknowledged one read back with
its `atLeast` token, for chaos tests where a write may be lost.

Writers own disjoint keys and write them one at a time, so the n-th acknowledged write of
a key is in its partition after the n-1 before it: a read with that write's token must
answer a count of at least n. Confirmers read every token back while the load runs (and
after it, until a deadline); a read that answers a count below n is a violation, one
that cannot see the write yet (CONSISTENCY_TIMEOUT, PARTITION_UNAVAILABLE) is asked
again.
"""

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

PRODUCE = 'mutation($k: String!) { produce(topic: "words", key: $k) { token } }'
READ_AT = "query($w: String!, $t: String!) { wordCount(word: $w, atLeast: $t) { count } }"
# what a read with a token may answer while the write is not visible yet: ask again
NOT_YET = {"CONSISTENCY_TIMEOUT", "PARTITION_UNAVAILABLE"}
WRITERS = 4
CONFIRMERS = 3
WRITE_PAUSE_S = 0.05  # each writer's pace
RETRY_PAUSE_S = 0.1  # between reads of a token that is not visible yet


@dataclass(frozen=True)
class Acked:
    """One acknowledged write: its key, token, and the key's acknowledged writes so far."""

    key: str
    token: str
    ordinal: int
    at: float  # monotonic time of the acknowledgement


@dataclass
class TokenWrites:
    """Writers and confirmers against the gateway at `url`, until `stop` is set."""

    url: str
    keys: list[str]
    stop: threading.Event
    acked: list[Acked] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    failed: list[tuple[float, str, str]] = field(default_factory=list)  # (sent, key, why)
    visible: dict[int, float] = field(default_factory=dict)  # acked index -> when seen
    problems: list[str] = field(default_factory=list)
    _next: int = 0  # the next acknowledged write a confirmer takes
    _writing: int = 0  # writers still running: until they return, more writes may come

    async def run(self, max_s: float, confirm_s: float) -> None:
        """Write for at most `max_s` (until `stop`), and confirm tokens until every one is
        visible or `confirm_s` after the writers stopped."""
        until = time.monotonic() + max_s
        self._writing = WRITERS
        async with httpx.AsyncClient(timeout=30.0, trust_env=False, verify=client_tls()) as http:
            writers = [self._write(http, self.keys[i::WRITERS], i, until) for i in range(WRITERS)]
            confirmers = [self._confirm_all(http, until + confirm_s) for _ in range(CONFIRMERS)]
            await asyncio.gather(*writers, *confirmers)

    def unconfirmed(self) -> list[Acked]:
        return [a for i, a in enumerate(self.acked) if i not in self.visible]

    async def _write(
        self, http: httpx.AsyncClient, keys: list[str], seed: int, until: float
    ) -> None:
        try:
            await self._write_until(http, keys, random.Random(seed), until)
        finally:
            self._writing -= 1

    async def _write_until(
        self, http: httpx.AsyncClient, keys: list[str], rng: random.Random, until: float
    ) -> None:
        while not self.stop.is_set() and time.monotonic() < until:
            key = rng.choice(keys)
            sent = time.monotonic()
            try:
                response = await http.post(
                    self.url, json={"query": PRODUCE, "variables": {"k": key}}
                )
                body: Any = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                self.problems.append(f"produce {key}: no answer: {type(exc).__name__}: {exc}")
                body = {}
            token = ((body.get("data") or {}).get("produce") or {}).get("token")
            if token:
                self.counts[key] += 1
                self.acked.append(Acked(key, token, self.counts[key], time.monotonic()))
            else:
                self.failed.append((sent, key, str(body.get("errors"))[:300]))
            await asyncio.sleep(WRITE_PAUSE_S)  # the writers' pace, not a wait for a condition

    async def _confirm_all(self, http: httpx.AsyncClient, until: float) -> None:
        """Take the next acknowledged write and read it until it is visible."""
        while time.monotonic() < until:
            if self._next >= len(self.acked):
                if self._writing == 0:
                    return
                await asyncio.sleep(RETRY_PAUSE_S)  # no write to confirm yet
                continue
            index, self._next = self._next, self._next + 1
            while time.monotonic() < until and not await self._confirm(http, index):
                await asyncio.sleep(RETRY_PAUSE_S)  # the write is not visible yet: ask again

    async def _confirm(self, http: httpx.AsyncClient, index: int) -> bool:
        """Whether acknowledged write `index` was seen (or found violated, a problem)."""
        write = self.acked[index]
        request = {"query": READ_AT, "variables": {"w": write.key, "t": write.token}}
        try:
            body = (await http.post(self.url, json=request)).json()
        except (httpx.HTTPError, ValueError) as exc:
            self.problems.append(f"atLeast {write.token}: no answer: {type(exc).__name__}")
            return False
        codes = {(e.get("extensions") or {}).get("code") for e in body.get("errors") or []}
        row = (body.get("data") or {}).get("wordCount")
        if codes and codes <= NOT_YET:
            return False
        if codes or row is None or int(row["count"]) < write.ordinal:
            self.problems.append(
                f"{write.key} write #{write.ordinal} ({write.token}) read with its token: {body}"
            )
        self.visible[index] = time.monotonic()
        return True
