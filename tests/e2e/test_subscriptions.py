"""Subscriptions with the real clients on the real cluster (broker, Spark pipeline, two
nodes, the gateway under uvicorn): graphql-ws, Apollo Client's GraphQLWsLink and
graphql-sse in both of its modes, all at once in one Node process, each on its own
connection, subscribe to a word's count and a customer's new bookings (a history view).
Produces (words through the gateway's `produce` mutation, bookings to Kafka) move both;
every update carries its offset, token and freshness. Each client then disconnects, the
values move on without it, and it resubscribes with `after: <its newest token>`: it gets
exactly the later changes, none twice: every later booking once, in order; every later
row of the count, one per changelog record. A subscription may also start from a query's
read token: it gets every change since that answer, none the answer held."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import orjson

from runtime.produce import Record, produce_records
from schema import partition_for
from tests.e2e.conftest import Cluster
from tests.live.subscribers import CLIENTS, Subscribers

COUNT = """subscription($k: String!, $after: String) {
  wordCount(word: $k, after: $after) {
    word count offset token freshness { partition node role appliedOffset lag }
  }
}"""
HISTORY = """subscription($k: String!, $after: String) {
  bookingHistory(customer: $k, after: $after) {
    customer trip eventTime offset token freshness { partition node role appliedOffset lag }
  }
}"""
PRODUCE = """mutation($topic: String!, $k: String!) {
  produce(topic: $topic, key: $k) { token }
}"""
READ_COUNT = "query($k: String!, $t: String) { wordCount(word: $k, atLeast: $t) { count } }"
BEFORE, WHILE_AWAY, AFTER = 3, 2, 1  # rounds: subscribed, disconnected, resumed
PROBE_S = 5.0  # how long a probe booking is waited for before another is sent


class Rounds:
    """Produces one record per round to every client's word (read back with `atLeast`
    before the next round: a round is one change of each count) and one booking per
    customer; `trips` are the bookings produced per customer, in order."""

    def __init__(self, cluster: Cluster, words: list[str], customers: list[str]) -> None:
        self.cluster = cluster
        self.words = words
        self.trips: dict[str, list[str]] = {c: [] for c in customers}
        self.done = 0
        self._events = 0
        self._epoch_ms = cluster.next_epoch_ms()

    def play(self) -> None:
        self.done += 1
        tokens = {word: self._produce({"topic": "words", "k": word}) for word in self.words}
        for word, token in tokens.items():
            read = self.cluster.data(READ_COUNT, {"k": word, "t": token})
            assert read["wordCount"] == {"count": self.done}, (word, read)
            self.cluster.truth.update([word])
        self.book(list(self.trips), f"t{self.done}")

    def book(self, customers: list[str], trip: str) -> None:
        """Bookings go to Kafka directly: their event times are past every earlier test's
        (`next_epoch_ms`), which may be further ahead of now than the mutation accepts."""
        self._events += 1
        event_ms = self._epoch_ms + self._events * 1000
        self.cluster.saw_event_times([event_ms])
        value = orjson.dumps({"trip": trip, "timestamp": event_ms})
        produce_records(self.cluster.local.kafka, "bookings", [Record(c, value) for c in customers])
        for customer in customers:
            self.trips[customer].append(trip)

    def _produce(self, variables: dict[str, Any]) -> str:
        token: str = self.cluster.data(PRODUCE, variables)["produce"]["token"]
        return token


def _long(value: Any) -> int:
    """A Long of an answer (an offset, a lag): a string of decimal digits, as an int."""
    assert isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value), value
    return int(value)


def _check_update(update: dict[str, Any], key: str, partitions: int, nodes: set[str]) -> None:
    """What every update carries: its offset, a token, the freshness of its copy (offsets
    and lag as Longs: strings of decimal digits)."""
    assert _long(update["offset"]) >= 0, update
    assert isinstance(update["token"], str) and update["token"], update
    freshness = update["freshness"]
    assert freshness["partition"] == partition_for(key, partitions), update
    assert freshness["node"] in nodes and freshness["role"] == "ACTIVE", update
    # the next offset it applied
    assert _long(freshness["appliedOffset"]) > _long(update["offset"]), update
    assert _long(freshness["lag"]) >= 0, update


def test_real_clients_see_values_move_and_resume_with_their_token(
    cluster: Cluster, tmp_path: Path
) -> None:
    words = {client: f"live-word-{client}" for client in CLIENTS}
    customers = {client: f"live-customer-{client}" for client in CLIENTS}
    rounds = Rounds(cluster, list(words.values()), list(customers.values()))
    rounds.play()  # a first row, for the count subscriptions to start with
    partitions = cluster.local.partitions
    nodes = set(cluster.local.nodes)
    with Subscribers(cluster.local.gateway_url, tmp_path / "clients.log") as clients:

        def subscribe(client: str, run: str, tokens: dict[str, str | None]) -> None:
            connection = f"{client}-{run}"
            for what, query, key in (("count", COUNT, words), ("history", HISTORY, customers)):
                variables = {"k": key[client], "after": tokens[what]}
                clients.subscribe(f"{connection}-{what}", client, query, variables, connection)

        def counts(client: str, run: str) -> list[dict[str, Any]]:
            return clients.data(f"{client}-{run}-count", "wordCount")

        def events(client: str, run: str) -> list[dict[str, Any]]:
            return clients.data(f"{client}-{run}-history", "bookingHistory")

        def showing(run: str, count: int) -> bool:
            return all(
                counts(c, run)[-1:] and counts(c, run)[-1]["count"] == count
                and events(c, run)[-1:] and events(c, run)[-1]["trip"] == f"t{count}"
                for c in CLIENTS
            )  # fmt: skip

        for client in CLIENTS:
            subscribe(client, "first", {"count": None, "history": None})
        clients.wait("every client's first count", lambda: all(counts(c, "first") for c in CLIENTS))
        # a history subscription starts with the next event: probe until each is following
        for probe in range(10):
            silent = [customers[c] for c in CLIENTS if not events(c, "first")]
            if not silent:
                break
            rounds.book(silent, f"probe{probe}")
            with contextlib.suppress(TimeoutError):
                clients.wait(
                    "the probes", lambda: all(events(c, "first") for c in CLIENTS), PROBE_S
                )
        for _ in range(BEFORE - 1):
            rounds.play()
            clients.wait(f"round {rounds.done} everywhere", lambda: showing("first", rounds.done))
        newest = {}
        for client in CLIENTS:
            newest[client] = {
                "count": counts(client, "first")[-1]["token"],
                "history": events(client, "first")[-1]["token"],
            }
            clients.close(f"{client}-first")
        for _ in range(WHILE_AWAY):
            rounds.play()
        for client in CLIENTS:
            subscribe(client, "resumed", newest[client])
        for _ in range(AFTER):
            rounds.play()
        clients.wait("every client's resumed changes", lambda: showing("resumed", rounds.done))
        received = {
            (client, run): (counts(client, run), events(client, run))
            for client in CLIENTS
            for run in ("first", "resumed")
        }
    for client in CLIENTS:
        counts_before, events_before = received[(client, "first")]
        counts_after, events_after = received[(client, "resumed")]
        # counts: first the current row, then one update per change
        assert [u["count"] for u in counts_before] == list(range(1, BEFORE + 1)), client
        # resumed: every later row, one per round (a round is one changelog record)
        later = list(range(BEFORE + 1, rounds.done + 1))
        assert [u["count"] for u in counts_after] == later, (client, counts_after)
        assert counts_after[-1]["count"] == rounds.done == cluster.truth[words[client]]
        # bookings: from where the subscription started, each once, in order
        produced = rounds.trips[customers[client]]
        trips_before = [u["trip"] for u in events_before]
        last = produced.index(f"t{BEFORE}") + 1
        assert trips_before == produced[last - len(trips_before) : last], (client, produced)
        assert trips_before[-(BEFORE - 1) :] == [f"t{n}" for n in range(2, BEFORE + 1)]
        # resumed: exactly the bookings after the token, none twice, no gap
        resumed = [f"t{n}" for n in range(BEFORE + 1, rounds.done + 1)]
        assert [u["trip"] for u in events_after] == resumed, (client, events_after)
        for updates, key in (
            (counts_before + counts_after, words[client]),
            (events_before + events_after, customers[client]),
        ):
            offsets = [int(u["offset"]) for u in updates]
            assert offsets == sorted(set(offsets)), (client, key, offsets)
            for update in updates:
                _check_update(update, key, partitions, nodes)
    assert cluster.counts(list(words.values())) == dict.fromkeys(words.values(), rounds.done)


READ_WITH_TOKEN = "query($k: String!) { wordCount(word: $k) { count } }"


def test_a_subscription_from_a_read_token_gets_every_change_since_the_read(
    cluster: Cluster, tmp_path: Path
) -> None:
    word = "live-word-from-read"
    rounds = Rounds(cluster, [word], [])
    for _ in range(2):
        rounds.play()
    body = cluster.query(READ_WITH_TOKEN, {"k": word}).json()
    assert body["data"] == {"wordCount": {"count": 2}}, body
    token = body["extensions"]["readToken"]
    for _ in range(3):  # changes after the read, before the subscription starts
        rounds.play()
    with Subscribers(cluster.local.gateway_url, tmp_path / "clients.log") as clients:
        variables = {"k": word, "after": token}
        clients.subscribe("from-read", "graphql-ws", COUNT, variables, "from-read")
        rounds.play()  # and one after it started
        clients.wait(
            "the changes since the read",
            lambda: [u["count"] for u in clients.data("from-read", "wordCount")][-1:] == [6],
        )
        received = [u["count"] for u in clients.data("from-read", "wordCount")]
    assert received == [3, 4, 5, 6]
