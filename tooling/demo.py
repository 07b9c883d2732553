"""`statefed demo`: the whole system on this machine, with live demo data.

Starts Apache Kafka (on STATEFED_BROKER_PORT, 9092 by default, so `statefed produce` and
every client reach it without settings; its data in the demo directory), two nodes, the
gateway and the Spark pipeline through `LocalCluster`, for the catalogue STATEFED_CATALOGUE
names (the built-in one by default). It produces the demo data of the demo's topics the
catalogue reads, prints the GraphiQL URL and example queries, then keeps a trickle of
events flowing until Ctrl-C, when it stops everything it started. A catalogue of your own
(`statefed init`) gets its topics and no data: produce your own events.

When a view of the catalogue reads Avro, JSON Schema or Protobuf values and no
STATEFED_REGISTRY_URL is set, the demo also runs a Schema Registry (Apicurio, on
STATEFED_REGISTRY_PORT, 8081, the address every part and serializer defaults to) and starts
the pipeline once every subject the views read is registered: it reads each subject's
versions at its start, and a producer's serializer registers its schema with its first
record.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import time
from pathlib import Path

import httpx
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient

from gateway.api.kinds import kind_of
from gateway.config import GatewayConfig
from gateway.model.timestamps import from_ms, iso
from runtime.clock import wall_clock_ms
from runtime.hosts import is_loopback
from runtime.produce import Record, new_producer, produce_records
from schema import CATALOGUE, WORD_COUNTS, ValueFormat, View, load_catalogue
from tooling import demodata
from tooling.config import ToolingConfig
from tooling.localcluster import LocalCluster
from tooling.processes import poll_client, wait_until
from tooling.registry import SchemaRegistry

__all__ = ["catalogue_examples", "examples", "iso_minute", "run_demo"]

_MINUTE_MS = 60_000
_MARK = ".statefed-demo"  # in a directory the demo empties at each start
# what a demo writes in its directory (tooling.localcluster, the registry beside it)
_DEMO_NAMES = frozenset(
    {"broker", "broker.log", "checkpoints", "pipeline.log", "state", "gateway.log", "registry"}
)


def examples(now_ms: int) -> str:
    """The example queries the demo prints, each answering with the demo data: the
    windows are minutes the demo's page views (spread over the last 10 minutes) fall in."""
    window = iso_minute(now_ms - 5 * _MINUTE_MS)
    since = iso_minute(now_ms - 10 * _MINUTE_MS)
    return f"""\
  {{ wordCount(word: "kafka") {{ word count }} }}
  {{ wordCounts(words: ["kafka", "franz", "nope"]) {{ word count }} }}
  {{ topWords(limit: 3) {{ word count }} }}
  {{ topHosts(limit: 3) {{ host count }} }}
  {{ hostAccessWindows(host: "graphql.org", from: "{since}") {{ start end count }} }}
  {{ topHostsPerMinute(limit: 3, window: {{start: "{window}"}}) {{ host count }} }}
  {{ lastBooking(customer: "c001") {{ trip eventTime }} }}
  {{ bookingHistory(customer: "c001", first: 3) {{ edges {{ node {{ trip eventTime }} }} }} }}
  {{ cluster {{ nodes {{ id state }} views {{ name lateDropped }} }} }}
  mutation {{ produce(topic: "words", key: "kafka") {{ token }} }}
  {{ wordCount(word: "kafka", atLeast: "<the token>") {{ count }} }}  # sees your write
More in schema/operations/ and docs/querying.md."""


def catalogue_examples(catalogue: tuple[View, ...]) -> str:
    """The queries the demo prints for a catalogue other than the built-in one: each view's
    GraphiQL example, on one line."""
    lines = []
    for view in catalogue:
        example = kind_of(view).example(view)
        if example:
            lines.append("  " + " ".join(example.split()))
    return "\n".join(lines) or "  { cluster { nodes { id state } } }"


def iso_minute(ms: int) -> str:
    """The start of the minute `ms` falls in, as the ISO-8601 UTC text windows start at."""
    return iso(from_ms(ms - ms % _MINUTE_MS)).replace("+00:00", "Z")


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _settings(env: dict[str, str]) -> tuple[Path, int, int, int]:
    tooling = ToolingConfig.from_env(env)
    port = GatewayConfig.from_env(env).port
    if not _port_free(port):
        raise SystemExit(
            f"port {port} is taken: stop what listens there or run `statefed demo --port N`"
        )
    if not _port_free(tooling.broker_port):
        raise SystemExit(
            f"port {tooling.broker_port} is taken (another Kafka?): stop what listens there "
            f"or run `statefed demo --broker-port N`"
        )
    return tooling.demo_dir, port, tooling.broker_port, tooling.partitions


def _access(env: dict[str, str]) -> str:
    """Who may call the demo's gateway: said in the banner, as it is open by default."""
    config = GatewayConfig.from_env(env)
    if config.authenticates:
        return "Access: a bearer token is needed (STATEFED_GATEWAY_AUTH=jwt)."
    where = f"on {config.host}" + (" only" if is_loopback(config.host) else "")
    return (
        "Access: anonymous, no token needed: authentication is off (STATEFED_GATEWAY_AUTH), "
        f"the gateway listens {where}."
    )


def _wipe(base: Path) -> None:
    """Empty `base` for a new demo, and mark it as the demo's; SystemExit when it holds
    anything else than an earlier demo's files (`--dir .` must not delete a project)."""
    if base.exists() and not base.is_dir():
        raise SystemExit(
            f"statefed demo: {base} is a file, and the demo needs a directory: name a new or "
            "empty one with --dir or STATEFED_DEMO_DIR"
        )
    if base.exists():
        foreign = sorted(e.name for e in base.iterdir() if not _demo_wrote(e.name))
        if foreign and not (base / _MARK).exists():
            raise SystemExit(
                f"statefed demo: {base} holds files the demo did not write "
                f"({', '.join(foreign[:5])}), and the demo empties its directory at each start: "
                f"name a new or empty one with --dir or STATEFED_DEMO_DIR"
            )
        shutil.rmtree(base)
    base.mkdir(parents=True)
    (base / _MARK).write_text("statefed demo: emptied at each start of the demo\n")


def _demo_wrote(name: str) -> bool:
    """Whether `name` in a demo directory is one a demo writes (an earlier one's, made
    before the directory was marked)."""
    return name in _DEMO_NAMES or (name.startswith("node-") and name.endswith(".log"))


def run_demo(env: dict[str, str]) -> None:
    base, port, broker_port, partitions = _settings(env)
    catalogue = load_catalogue(ToolingConfig.from_env(env).catalogue)
    # Each demo starts from a clean directory: the broker's topics, the pipeline's
    # checkpoints and the node stores of an earlier demo would be produced into again
    # from the start, counting the demo data twice.
    _wipe(base)
    # Ctrl-C stops the demo even when it was started from a shell that ignores SIGINT for
    # its background jobs (Python then keeps it ignored): raise KeyboardInterrupt again; and
    # SIGTERM stops it as Ctrl-C does, also while the parts start (minutes)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    # the demo writes through the gateway (see `examples`): on, unless the caller said otherwise;
    # and a read waits up to 15 s for a write (`atLeast`): on one machine with every part,
    # the pipeline's queries take several seconds a micro-batch (measured 4-6 s on 2 cores)
    env = {"STATEFED_GATEWAY_PRODUCE": "true", "STATEFED_GATEWAY_TIMEOUT_MS": "15000", **env}
    registry = _registry(env, catalogue, base)
    if registry is not None:  # every part finds it where the demo runs it
        env = {**env, "STATEFED_REGISTRY_URL": registry.url}
    cluster = LocalCluster(
        base, partitions, gateway_port=port, env=env, progress=_say, broker_port=broker_port
    )
    topics = {view.topic for view in catalogue}
    try:
        if registry is not None:
            _say(f"Schema Registry: starting (Apicurio) on {registry.url}")
            registry.start()
        _start(cluster, catalogue, registry)
        _say_what_is_open(env)
        _produce_initial(cluster.bootstrap, topics)
        if WORD_COUNTS in catalogue:
            _wait_visible(cluster.gateway_url)
        tried = (
            examples(wall_clock_ms()) if catalogue == CATALOGUE else catalogue_examples(catalogue)
        )
        print(f"\nGraphiQL: {cluster.gateway_url}\n{_access(env)}\nTry:\n{tried}\n", flush=True)
        print(
            f"Kafka: {cluster.bootstrap}. Logs: {base}/*.log. Ctrl-C stops everything.\n",
            flush=True,
        )
        _trickle(cluster.bootstrap, topics)
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        _say(f"demo failed: {exc}")
        raise SystemExit(1) from exc
    finally:
        _say("stopping ... (Ctrl-C again ends what is left at once)")
        stopped = cluster.stop()
        if registry is not None and registry.running:
            try:
                registry.stop()
                stopped.append("Schema Registry")
            except KeyboardInterrupt:  # it ends with this process (parent-death signal)
                stopped.append("Schema Registry (interrupted)")
        _say(f"stopped {', '.join(stopped) or 'nothing'}")


def _registry(
    env: dict[str, str], catalogue: tuple[View, ...], base: Path
) -> SchemaRegistry | None:
    """The Schema Registry the demo runs: when a view reads registered values and no
    STATEFED_REGISTRY_URL names one of the user's."""
    if "STATEFED_REGISTRY_URL" in env or not _subjects(catalogue):
        return None
    port = ToolingConfig.from_env(env).registry_port
    if not _port_free(port):
        raise SystemExit(
            f"port {port} is taken (another Schema Registry?): stop what listens there, run "
            f"`statefed demo` with STATEFED_REGISTRY_PORT=N, or name yours in "
            f"STATEFED_REGISTRY_URL"
        )
    (base / "registry").mkdir(parents=True, exist_ok=True)
    return SchemaRegistry(base / "registry", port=port)


def _subjects(catalogue: tuple[View, ...]) -> list[str]:
    """The subjects the views of registered values read, in catalogue order."""
    found = [v.subject for v in catalogue if v.value_format is not ValueFormat.JSON]
    return list(dict.fromkeys(found))


def _start(
    cluster: LocalCluster,
    catalogue: tuple[View, ...],
    registry: SchemaRegistry | None,
) -> None:
    """Every part; the pipeline only once the views' subjects are registered."""
    cluster.start_broker()
    for node_id in ("n1", "n2"):
        cluster.start_node(node_id)
    cluster.start_gateway()
    if registry is not None:
        _wait_for_subjects(registry.url, _subjects(catalogue), cluster.bootstrap)
    cluster.start_pipeline()
    cluster.wait_routable()


def _wait_for_subjects(url: str, subjects: list[str], bootstrap: str) -> None:
    """Until every subject is registered (Ctrl-C or SIGTERM interrupts it)."""
    with SchemaRegistryClient({"url": url}) as client:

        def missing() -> list[str]:
            registered = set(client.get_subjects())  # one call per poll
            return [s for s in subjects if s not in registered]

        if missing():
            _say(
                f"waiting for subjects {', '.join(missing())} to be registered: produce to "
                f"Kafka at {bootstrap} with a serializer that registers its schema (its "
                f"first record does) at {url}, or register them there; the pipeline starts "
                f"then"
            )
        while missing():
            time.sleep(1.0)  # a person registers them: polled once a second


def _say_what_is_open(env: dict[str, str]) -> None:
    if GatewayConfig.from_env(env).produce:
        writes = "the produce mutation is ON: anyone reaching it writes events"
    else:
        writes = "the produce mutation is off"
    _say(f"gateway: loopback, anonymous; {writes} (STATEFED_GATEWAY_PRODUCE)")


def _produce(
    bootstrap: str, batch: dict[str, list[Record]], topics: set[str], producer: Producer
) -> None:
    """The demo data of the topics the catalogue reads (`topics`)."""
    for topic, records in batch.items():
        if topic in topics:
            produce_records(bootstrap, topic, records, producer)


def _produce_initial(bootstrap: str, topics: set[str]) -> None:
    rng = random.Random(1)
    now = wall_clock_ms()
    batch = {
        "words": demodata.words(5000, rng),
        "pageviews": demodata.pageviews(3000, rng, now),
        "bookings": demodata.bookings(500, rng, now),
    }
    _produce(bootstrap, batch, topics, new_producer(bootstrap))
    for topic in sorted(topics):
        if topic in batch:
            _say(f"demo data: {len(batch[topic])} events produced to topic {topic}")
        else:
            _say(f"topic {topic}: no demo data, produce your own events to it")


def _wait_visible(gateway_url: str, timeout_s: float = 180.0) -> None:
    """Wait until the first micro-batch reached the stores, so the URL we print answers."""
    _say("demo data: waiting for the first micro-batch to reach the nodes")
    started = time.monotonic()
    query = {"query": '{ wordCount(word: "kafka") { count } }'}

    def visible() -> bool:
        try:
            body = http.post(gateway_url, json=query).json()
        except (httpx.HTTPError, ValueError):
            return False
        return bool((body.get("data") or {}).get("wordCount"))

    with poll_client(timeout_s=5.0) as http:
        wait_until(visible, timeout_s, "the demo data to be visible through the gateway", 0.5)
    _say(f"demo data: visible through the gateway after {time.monotonic() - started:.1f} s")


def _trickle(bootstrap: str, topics: set[str]) -> None:
    """A few events a second, so what GraphiQL shows moves, until Ctrl-C or SIGTERM."""
    producer = new_producer(bootstrap)
    rng = random.Random(2)
    tick = 0
    while True:
        time.sleep(1.0)  # the pace of the trickle
        tick += 1
        _produce(bootstrap, demodata.trickle(tick, rng, wall_clock_ms()), topics, producer)
