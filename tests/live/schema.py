"""A tiny schema for the transport tests: a finite `countdown` (and `steps`, its objects),
endless `ticks`, a `flood` as fast as it is taken, a subscription that needs a scope, one that
names its caller, `running` (how many subscription generators are alive now), so a test
sees a source stop, and a `gated` query that is answered only once a test opens the `Gate`."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from collections.abc import AsyncGenerator

import strawberry
from strawberry.types import Info

from gateway.api.fields.common import authorize
from gateway.api.request import RequestContext

__all__ = ["SCHEMA", "SECRET_SCOPE", "Flooded", "Gate", "Running"]

SECRET_SCOPE = "secret:read"
_TICK_S = 0.02  # the pace of `ticks`, so an endless source does not flood a test client


class Running:
    """The subscription generators alive now (read by the tests in the server's process)."""

    count = 0


class Flooded:
    """How many events `flood` has produced (read by the tests in the server's process)."""

    events = 0

    @classmethod
    def settled(cls, last: list[int]) -> int | None:
        """The count once it is the same twice in a row, `last` keeping the counts seen:
        the flood's source waits for its client."""
        last.append(cls.events)
        return last[-1] if len(last) > 1 and last[-1] == last[-2] else None


class Gate:
    """Holds `gated` queries in flight until a test opens it; `waiting` counts those held (read
    by the tests in the server's process)."""

    opened = threading.Event()
    waiting = 0


@strawberry.type
class Query:
    @strawberry.field
    def running(self) -> int:
        return Running.count

    @strawberry.field
    async def gated(self) -> str:
        Gate.waiting += 1
        try:
            while not Gate.opened.is_set():  # the test's thread opens it
                await asyncio.sleep(_TICK_S)
        finally:
            Gate.waiting -= 1
        return "through"

    @strawberry.field
    def hello(self, name: str = "world") -> str:
        return f"hello {name}"


@strawberry.type
class Mutation:
    @strawberry.mutation
    def echo(self, text: str) -> str:
        return text


@strawberry.type
class Step:
    value: int

    @strawberry.field
    def double(self) -> int:  # a resolver of its own: its events are executed
        return self.value * 2


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def countdown(self, start: int) -> AsyncGenerator[int, None]:
        Running.count += 1
        try:
            for value in range(start, -1, -1):
                yield value
        finally:
            Running.count -= 1

    @strawberry.subscription
    async def steps(self, start: int) -> AsyncGenerator[Step, None]:
        for value in range(start, -1, -1):
            yield Step(value=value)

    @strawberry.subscription
    async def ticks(self) -> AsyncGenerator[int, None]:
        Running.count += 1
        try:
            tick = 0
            while True:
                yield tick
                tick += 1
                await asyncio.sleep(_TICK_S)
        finally:
            Running.count -= 1

    @strawberry.subscription
    async def flood(self, size: int) -> AsyncGenerator[str, None]:
        """Events of `size` random characters (which WebSocket compression cannot shrink), as
        fast as they are taken."""
        Running.count += 1
        try:
            while True:
                Flooded.events += 1
                yield base64.b64encode(os.urandom(size))[:size].decode()
        finally:
            Running.count -= 1

    @strawberry.subscription
    async def secret(self, info: Info[RequestContext, None]) -> AsyncGenerator[str, None]:
        authorize(info.context, SECRET_SCOPE, "secret")
        yield "the secret"

    @strawberry.subscription
    async def whoami(self, info: Info[RequestContext, None]) -> AsyncGenerator[str, None]:
        yield info.context.principal.subject


SCHEMA = strawberry.Schema(Query, mutation=Mutation, subscription=Subscription)
