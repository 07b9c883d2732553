"""`statefed`: one command line for every part of the system.

Every flag is a shorthand for an environment variable with the `STATEFED_` prefix (shown
in `--help`); each part reads its configuration from the environment in one place, so a
flag, an exported variable and a compose file's `environment:` are the same thing.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from runtime.config import ConfigError
from runtime.kafka import KAFKA_CLIENT_LOGGER, KafkaConnectionError
from runtime.signals import set_from_handler
from schema import CatalogueError, View, load_catalogue
from tooling.config import ToolingConfig

if TYPE_CHECKING:
    from pipeline import PipelineConfig
    from runtime.topics import TopicCheck

__all__ = ["main"]

# (flag, environment variable, help) per subcommand
_COMMON = [
    ("--bootstrap", "STATEFED_BOOTSTRAP", "Kafka bootstrap servers (127.0.0.1:9092)"),
    ("--catalogue", "STATEFED_CATALOGUE", "views to serve, `package.module:NAME` (built-in)"),
]
_CATALOGUE_FLAG, _CATALOGUE, _ = _COMMON[1]
_FLAGS: dict[str, list[tuple[str, str, str]]] = {
    "broker": [
        ("--host", "STATEFED_BROKER_HOST", "loopback address to listen on (127.0.0.1)"),
        ("--port", "STATEFED_BROKER_PORT", "port to listen on (9092)"),
        ("--dir", "STATEFED_BROKER_DIR", "Kafka's data directory, kept (.statefed/broker)"),
        ("--partitions", "STATEFED_PARTITIONS", "partitions of each input topic (6)"),
        _COMMON[1],
    ],
    "registry": [
        ("--port", "STATEFED_REGISTRY_PORT", "port to listen on, on 127.0.0.1 (8081)"),
        ("--dir", "STATEFED_REGISTRY_DIR", "working directory and log (.statefed/registry)"),
    ],
    "topics": [
        *_COMMON,
        ("--partitions", "STATEFED_PARTITIONS", "partitions per input topic (6)"),
        ("--replication-factor", "STATEFED_TOPICS_REPLICATION_FACTOR", "replicas per topic (3)"),
        (
            "--min-insync-replicas",
            "STATEFED_TOPICS_MIN_INSYNC_REPLICAS",
            "min.insync.replicas of every topic (replication factor - 1, at least 1)",
        ),
    ],
    "pipeline": [
        *_COMMON,
        ("--checkpoint-dir", "STATEFED_CHECKPOINT_DIR", "Spark checkpoints, one per view"),
        ("--master", "STATEFED_SPARK_MASTER", "Spark master (local[2])"),
    ],
    "node": [
        *_COMMON,
        ("--id", "STATEFED_NODE_ID", "node id, unique in the cluster"),
        ("--host", "STATEFED_NODE_HOST", "address to serve on (127.0.0.1)"),
        ("--port", "STATEFED_NODE_PORT", "port to serve on (8101)"),
        ("--url", "STATEFED_NODE_URL", "URL the gateway reaches this node at"),
        ("--state-dir", "STATEFED_STATE_DIR", "directory of the LevelDB partition stores"),
    ],
    "gateway": [
        *_COMMON,
        ("--host", "STATEFED_GATEWAY_HOST", "address to serve on (127.0.0.1)"),
        ("--port", "STATEFED_GATEWAY_PORT", "port to serve on (8100)"),
    ],
    "produce": [*_COMMON],
    "status": [
        ("--url", "STATEFED_GATEWAY_URL", "the gateway's URL (http://127.0.0.1:8100)"),
        ("--token", "STATEFED_GATEWAY_TOKEN", "bearer token with the operator scope (none)"),
    ],
    "demo": [
        _COMMON[1],
        ("--port", "STATEFED_GATEWAY_PORT", "gateway port (8100)"),
        ("--broker-port", "STATEFED_BROKER_PORT", "Kafka's port, on 127.0.0.1 (9092)"),
        ("--partitions", "STATEFED_PARTITIONS", "partitions of each input topic (6)"),
        (
            "--dir",
            "STATEFED_DEMO_DIR",
            "where the demo keeps state and logs, emptied at each start (.statefed/demo)",
        ),
    ],
    "schema": [_COMMON[1]],
    "fields": [
        ("--registry", "STATEFED_REGISTRY_URL", "the Schema Registry (statefed registry's)")
    ],
    "init": [],
}
_HELP = {
    "broker": "run Apache Kafka locally (KRaft, one broker) and create statefed's topics",
    "registry": "run a Schema Registry locally (Apicurio Registry, Confluent's API)",
    "topics": "create statefed's topics on an existing Kafka cluster",
    "pipeline": "run the Spark Structured Streaming pipeline that computes every view",
    "node": "run a node: materialize partitions into LevelDB and serve its GraphQL subgraph",
    "gateway": "run the gateway: the one GraphQL endpoint (GraphiQL at /graphql)",
    "produce": "produce keys (and JSON values) to a topic, from stdin or generated",
    "status": "show the cluster live: nodes, partition map, restores, pipeline, dead letters",
    "demo": "run everything locally with demo data and print the GraphiQL URL",
    "schema": "print the catalogue's GraphQL SDL (the gateway's, or the node's), or write it",
    "fields": "print a registered schema's value fields, as a view's value_fields to paste",
    "init": "start a project of your own: a catalogue of views, a demo producer, the steps",
}
_VALUE_HELP = (
    "JSON value of every key (a stdin line KEY=JSON, a JSON object, array or string, gives "
    "that key its own; any other '=' is part of a key). A topic whose "
    "views read the value needs a JSON object, e.g. for bookings "
    """'{"trip": "ZRH-LIS"}'; an event time field of the views defaults to now"""
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="statefed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command, flags in _FLAGS.items():
        p = sub.add_parser(command, help=_HELP[command], description=_HELP[command])
        for flag, env, text in flags:
            p.add_argument(flag, dest=env, metavar=flag.strip("-").upper(), help=f"{text} [{env}]")
        if command == "produce":
            p.add_argument("--topic", default="words", help="topic to produce to (words)")
            p.add_argument(
                "--count",
                type=_positive,
                help="generate this many skewed words instead of reading stdin",
            )
            p.add_argument(
                "--seed", type=int, default=0, help="seed of the words --count generates (0)"
            )
            p.add_argument("--value", metavar="JSON", help=_VALUE_HELP)
        if command == "schema":
            _schema_arguments(p)
        if command == "status":
            p.add_argument(
                "--once",
                action="store_true",
                help="print the status once and exit (as when the output is not a terminal)",
            )
        if command == "fields":
            p.add_argument("subject", help="the subject, e.g. orders-value")
            p.add_argument("--version", type=int, help="a version of the subject (the newest)")
        if command == "init":
            p.add_argument("directory", type=Path, nargs="?", default=Path("."), help="(.)")
        if command == "topics":
            p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        if command == "pipeline":
            p.add_argument(
                "--check-health",
                action="store_true",
                help="exit 0 if the pipeline writing STATEFED_PIPELINE_HEALTH_FILE runs, else 1",
            )
            p.add_argument(
                "--print-app-path",
                action="store_true",
                help="print the path of the application file for spark-submit, and exit",
            )
    return parser


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node", action="store_true", help="the node subgraph's SDL, not the gateway's"
    )
    parser.add_argument(
        "--out",
        metavar="PATH",
        help="write to this file instead of printing, or into this directory (one that exists, "
        "or a path ending in /, made if missing): gateway.graphql and Apollo Client's "
        "possibleTypes.json (node.graphql with --node)",
    )
    parser.add_argument(
        "--breaking",
        type=Path,
        metavar="BASELINE",
        help="print each breaking change since the SDL in this file (e.g. your committed one) "
        "and exit 1 if there is one; additions are not breaking",
    )


def _positive(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return number


def _environment(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in vars(args).items():
        if key.startswith("STATEFED_") and value is not None:
            env[key] = str(value)
    return env


_WATCH_S = 1.0  # how often a command serving a JVM checks it still runs


def _wait_for_signal(ready: str, exited: Callable[[], str | None]) -> None:
    """Say `ready` on stderr, then wait for Ctrl-C or SIGTERM (whoever waits for the line
    may signal at once); exit with `exited()`'s report, status 1, if what the command
    serves ends on its own meanwhile."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: set_from_handler(stop))
    print(ready, file=sys.stderr)
    while not stop.wait(_WATCH_S):
        report = exited()
        if report is not None:
            raise SystemExit(report)


def _interrupt_on_sigterm() -> None:
    """Until `_wait_for_signal` takes over: SIGTERM interrupts as Ctrl-C does, so a JVM
    being started is stopped cleanly rather than left to the parent-death signal's SIGKILL
    (Python's default for SIGTERM ends it without running any `finally`)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _broker(env: dict[str, str]) -> None:
    from runtime.hosts import is_loopback
    from runtime.topics import TopicError, ensure_topics, statefed_topics
    from tooling.broker import BrokerStartError, KafkaBroker

    config = ToolingConfig.from_env(env)
    if not is_loopback(config.broker_host):
        raise ToolingConfig.config_error(
            "STATEFED_BROKER_HOST",
            f"must be a loopback address (127.0.0.1, ::1 or localhost), got "
            f"{config.broker_host!r}: the local broker is plaintext without authentication, "
            "so anyone who reached it could read and write every topic; for other hosts run "
            "a Kafka cluster of your own (docs/operations.md, The local broker)",
        )
    broker = KafkaBroker(
        host=config.broker_host,
        port=config.broker_port,
        data_dir=config.broker_dir,
        log_path=config.broker_dir / "kafka.log",
    )
    try:
        config.broker_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SystemExit(
            f"statefed broker: cannot make {config.broker_dir} ({exc.strerror}): choose "
            "another --dir (STATEFED_BROKER_DIR)"
        ) from exc
    _interrupt_on_sigterm()
    try:
        try:
            broker.start()
        except BrokerStartError as exc:
            raise SystemExit(f"statefed broker: {exc}") from exc
        try:
            planned = statefed_topics(config.partitions, _catalogue(env))
            kept = ensure_topics(broker.bootstrap, planned)
        except TopicError as exc:
            raise SystemExit(f"statefed broker: {exc}") from exc
        for topic, partitions in sorted(kept.items()):
            print(
                f"statefed broker: warning: topic {topic} keeps its {partitions} partitions "
                f"from an earlier start in {config.broker_dir}, not {planned[topic]}: statefed "
                "changes no topic's partition count (its keys would move to other "
                "partitions); start with another --dir for new topics",
                file=sys.stderr,
            )
        _wait_for_signal(
            f"statefed broker: Apache Kafka ready on {broker.bootstrap}, data in "
            f"{config.broker_dir}, log in {broker.log_path}",
            broker.exited,
        )
    finally:
        broker.stop()
    print("statefed broker: stopped", file=sys.stderr)


def _registry(env: dict[str, str]) -> None:
    from tooling.registry import REGISTRY_VERSION, RegistryStartError, SchemaRegistry

    config = ToolingConfig.from_env(env)
    registry = SchemaRegistry(config.registry_dir, port=config.registry_port)
    _interrupt_on_sigterm()  # the registry cleans up after a start it did not finish
    try:
        registry.start()
    except RegistryStartError as exc:
        raise SystemExit(f"statefed registry: {exc}") from exc
    try:
        _wait_for_signal(
            f"statefed registry: Apicurio Registry {REGISTRY_VERSION} ready; clients use "
            f"{registry.url} (Confluent's API), log in {registry.log_path}",
            registry.exited,
        )
    finally:
        registry.stop()
    print("statefed registry: stopped", file=sys.stderr)


def _catalogue(env: dict[str, str]) -> tuple[View, ...]:
    """The views STATEFED_CATALOGUE names; a CatalogueError (main names the command and
    the flag) when they do not load."""
    return load_catalogue(ToolingConfig.from_env(env).catalogue)


def _topics(env: dict[str, str], dry_run: bool) -> None:
    from runtime.topics import TopicError, create_planned, inspect_plan, topic_plan

    config = ToolingConfig.from_env(env)
    _quiet_kafka_client_logs()
    try:
        plan = topic_plan(
            _catalogue(env), config.partitions, config.topics_replication, config.topics_min_isr
        )
        checks = inspect_plan(config.kafka, plan)
    except (TopicError, KafkaConnectionError) as exc:
        raise SystemExit(f"statefed topics: {exc}") from exc
    _print_checks(checks)
    problems = [p for c in checks for p in c.problems]
    if problems:
        raise SystemExit(f"statefed topics: {len(problems)} problem(s) above; nothing was created")
    if dry_run:
        print("dry run: nothing was created")
        return
    try:
        create_planned(config.kafka, checks)
        created = {c.spec.name for c in checks if c.action == "create"}
        after = [c for c in inspect_plan(config.kafka, plan) if c.spec.name in created]
    except (TopicError, KafkaConnectionError) as exc:
        raise SystemExit(f"statefed topics: {exc}") from exc
    # what the broker did not apply of what was asked (e.g. a config it ignores), or a topic
    # another client created meanwhile (auto-creation), which Kafka then kept
    _print_checks([c for c in after if c.action != "exists ok"], prefix="created, but ")
    later = [p for c in after for p in c.problems]
    if later:
        raise SystemExit(
            f"statefed topics: {len(later)} problem(s) above in topics as the broker has them "
            "now (another client may have created them first): fix them as said"
        )
    print(f"created {len(created)} topic(s) on {config.bootstrap}")


def _print_checks(checks: Sequence[TopicCheck], prefix: str = "") -> None:
    for check in checks:
        print(prefix + check.line())
        for problem in check.problems:
            print(f"  error: {problem}")
        for note in check.notes:
            print(f"  warning: {note}")


def _pipeline(env: dict[str, str], check_health: bool, print_app_path: bool) -> None:
    if print_app_path:
        # next to this module; importing it would make an import cycle (it imports this)
        print(Path(__file__).resolve().with_name("sparkapp.py"))
        return
    from pipeline import PipelineConfig, PipelineError, run_pipeline

    config = PipelineConfig.from_env(env)
    if check_health:
        _check_pipeline_health(config)
        return
    try:
        run_pipeline(config, _catalogue(env))
    except PipelineError as exc:  # its message names the cause and what to change
        raise SystemExit(f"statefed pipeline: {exc}") from exc


def _check_pipeline_health(config: PipelineConfig) -> None:
    """For a container health check: one line, and exit status 0 (healthy) or 1."""
    from pipeline import check_health
    from runtime.clock import wall_clock_ms

    if config.health_file is None:
        raise SystemExit(
            "statefed pipeline: STATEFED_PIPELINE_HEALTH_FILE is not set, so the pipeline keeps "
            "no health file to check: set it (the same value) for the pipeline and the check"
        )
    healthy, why = check_health(config.health_file, config.health_max_age_ms, wall_clock_ms())
    print(f"statefed pipeline: {'healthy' if healthy else 'unhealthy'}: {why}")
    if not healthy:
        raise SystemExit(1)


def _node(env: dict[str, str]) -> None:
    from node.config import NodeConfig
    from node.errors import NodeError
    from node.serve.server import run_node
    from tooling.restoreview import restore_progress

    config = NodeConfig.from_env(env)
    try:
        # the bars are for a person watching a terminal; in JSON mode every line is a log
        if not sys.stderr.isatty() or config.log_format == "json":
            run_node(config, _catalogue(env))
            return
        with restore_progress(config.url):  # progress bars for a person watching
            run_node(config, _catalogue(env))
    except NodeError as exc:  # the failure was logged with its traceback where it happened
        raise SystemExit(f"statefed node: {exc}") from exc


def _gateway(env: dict[str, str]) -> None:
    from gateway.config import GatewayConfig
    from gateway.edge.server import run_gateway

    run_gateway(GatewayConfig.from_env(env), _catalogue(env))


_TOKENS_SHOWN = 20  # consistency tokens printed per key, for a few keys typed by hand


def _quiet_kafka_client_logs() -> None:
    """Keep the Kafka clients' log lines off a one-shot command's output: while a broker
    is unreachable librdkafka logs a line per reconnect (about 290 in `statefed topics`'
    15 s), and the command's own error already names the cause its clients reported
    (`runtime.kafka.ErrorTrap`) and the settings to check."""
    clients = logging.getLogger(KAFKA_CLIENT_LOGGER)
    if not clients.handlers:
        clients.addHandler(logging.NullHandler())
    clients.propagate = False


def _produce(env: dict[str, str], args: argparse.Namespace) -> None:
    from runtime.clock import wall_clock_ms
    from runtime.produce import ProduceError, max_bytes, new_producer, produce_records
    from runtime.topics import TopicError, partition_count
    from tooling.demodata import skewed_words
    from tooling.produceinput import (
        KeyedValue,
        ProduceInputError,
        parse_value,
        read_keys,
        records_for,
    )

    config = ToolingConfig.from_env(env)
    kafka = config.kafka
    catalogue = _catalogue(env)
    try:
        # refused before anything is generated or typed
        value = None if args.value is None else parse_value(args.value, "--value")
        if args.count is not None:
            keyed = [KeyedValue(k, value) for k in skewed_words(args.count, seed=args.seed)]
        else:
            if sys.stdin.isatty():  # a person at a terminal, not a pipe: say what to type
                print(
                    "statefed produce: type keys, or KEY=JSON lines, then Ctrl-D to produce "
                    "them (or pipe them in; --count N generates words)",
                    file=sys.stderr,
                )
            keyed = read_keys(sys.stdin, value)
            if not keyed:
                raise ProduceInputError(
                    "no keys on stdin: give keys separated by spaces or lines, or KEY=JSON "
                    "lines, or --count N for generated words"
                )
        records = records_for(
            args.topic, catalogue, keyed, wall_clock_ms(), config.max_ahead_ms, max_bytes(kafka)
        )
    except ProduceInputError as exc:
        raise SystemExit(f"statefed produce: {exc}; nothing was produced") from exc
    read = sorted({v.topic for v in catalogue})
    if args.topic not in read:
        print(
            f"statefed produce: warning: no view reads topic {args.topic} (topics read: "
            f"{', '.join(read)})",
            file=sys.stderr,
        )
    _quiet_kafka_client_logs()
    try:  # a cluster that does not answer, or a topic it lacks, fails in seconds, not in 30
        partition_count(kafka, args.topic)
    except (KafkaConnectionError, TopicError) as exc:
        raise SystemExit(f"statefed produce: {exc}; nothing was produced") from exc
    producer = new_producer(kafka)  # its lines go to the `runtime.kafka` logger, quieted
    try:
        writes = produce_records(kafka, args.topic, records, producer)
    except ProduceError as exc:
        raise SystemExit(f"statefed produce: {exc}") from exc
    records_word = "record" if len(writes) == 1 else "records"
    print(f"produced {len(writes)} {records_word} to {args.topic} on {kafka.bootstrap}")
    newest = {w.key: w for w in sorted(writes, key=lambda w: w.offset)}  # a key: one partition
    if len(newest) <= _TOKENS_SHOWN:
        for key, write in newest.items():
            print(f"  {key}: atLeast token {write.token}")


def _status(env: dict[str, str], once: bool) -> None:
    from rich.console import Console

    from tooling.statusview import StatusUnavailable, show_status

    config = ToolingConfig.from_env(env)
    try:
        show_status(config.gateway_url, config.gateway_token, once=once, console=Console())
    except StatusUnavailable as exc:
        raise SystemExit(f"statefed status: {exc}") from exc
    except KeyboardInterrupt:
        pass


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    env = _environment(args)
    handlers: dict[str, Callable[[dict[str, str]], None]] = {
        "broker": _broker,
        "registry": _registry,
        "topics": lambda e: _topics(e, args.dry_run),
        "pipeline": lambda e: _pipeline(e, args.check_health, args.print_app_path),
        "node": _node,
        "gateway": _gateway,
        "produce": lambda e: _produce(e, args),
        "status": lambda e: _status(e, args.once),
        "demo": _demo,
        "schema": lambda e: _schema(e, args.node, args.out, args.breaking),
        "fields": lambda e: _fields(e, args.subject, args.version),
        "init": lambda e: _init(args.directory),
    }
    try:
        handlers[args.command](env)
    # every part's configuration error derives from ConfigError; an unreachable Kafka says
    # which settings to check
    except (ConfigError, CatalogueError, KafkaConnectionError) as exc:
        raise SystemExit(f"statefed {args.command}: {_as_typed(exc, args)}") from exc
    # a message of a handler's that does not name the command
    except SystemExit as exc:
        if isinstance(exc.code, str) and not exc.code.startswith("statefed "):
            raise SystemExit(f"statefed {args.command}: {exc.code}") from exc
        raise
    # Ctrl-C where no server handles it (a server stops cleanly and returns): while a part
    # starts, or while produce reads stdin
    except KeyboardInterrupt:
        print(f"statefed {args.command}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _as_typed(error: Exception, args: argparse.Namespace) -> str:
    """`error`'s text, naming the flag where the variable it names was given as one
    (`--partitions abc` is about --partitions, not about an unset STATEFED_PARTITIONS)."""
    if isinstance(error, ConfigError):
        for flag, variable, _ in _FLAGS[args.command]:
            if variable == error.variable and getattr(args, variable, None) is not None:
                return f"{flag} ({variable}): {error.problem}"
    if isinstance(error, CatalogueError) and getattr(args, _CATALOGUE, None) is not None:
        return f"{_CATALOGUE_FLAG} {error.spec!r}: {error.problem}"
    return str(error)


def _schema(env: dict[str, str], node: bool, out: str | None, breaking: Path | None) -> None:
    """The schema files of the catalogue STATEFED_CATALOGUE names, as `make schema` writes
    the built-in catalogue's into schema/; with `breaking`, what breaks since that SDL."""
    from gateway.api.schema import print_sdl as gateway_sdl
    from gateway.execute.possibletypes import print_possible_types
    from node.subgraph.schema import print_sdl as node_sdl

    if breaking is not None and out is not None:  # a usage error: argparse's status, 2
        _schema_refusal(
            "--breaking compares and writes nothing, so --out would be ignored: run it "
            "without --out, then with --out alone to write the files"
        )
    catalogue = _catalogue(env)
    try:
        if node:
            files = {"node.graphql": node_sdl(catalogue)}
        else:
            files = {
                "gateway.graphql": gateway_sdl(catalogue),
                "possibleTypes.json": print_possible_types(catalogue),
            }
    # load_catalogue refuses the clashes it knows of; whatever else strawberry or
    # graphql-core refuse to build (their own exception types, texts of several lines) is
    # still one line naming the command, never a traceback
    except Exception as exc:
        problem = " ".join(str(exc).split())
        raise SystemExit(
            f"statefed schema: the schema of this catalogue cannot be built: "
            f"{type(exc).__name__}: {problem}"
        ) from exc
    sdl = next(iter(files.values()))
    if breaking is not None:
        _breaking(breaking, sdl)
        return
    if out is None:
        sys.stdout.write(sdl)
        return
    target = Path(out)
    directory = out.endswith(("/", os.sep)) or target.is_dir()
    if directory:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SystemExit(f"statefed schema: cannot make {target}: {exc.strerror}") from exc
    written = {target / name: text for name, text in files.items()} if directory else {target: sdl}
    for path, text in written.items():
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SystemExit(f"statefed schema: cannot write {path}: {exc.strerror}") from exc
        print(f"statefed schema: wrote {path}", file=sys.stderr)


def _breaking(baseline: Path, sdl: str) -> None:
    """Exit 1 naming each breaking change from the SDL in `baseline` to `sdl`; exit 2 when
    `baseline` holds no SDL to compare with (so that CI tells a broken baseline from a
    breaking change)."""
    from graphql import GraphQLError

    from tooling.breaking import breaking_changes

    try:
        before = baseline.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _schema_refusal(f"cannot read {baseline}: {getattr(exc, 'strerror', None) or exc}")
    try:
        changes = breaking_changes(baseline.name, before, sdl)
    except (GraphQLError, TypeError) as exc:  # TypeError: a type it names is not defined
        _schema_refusal(f"{baseline} holds no valid GraphQL SDL: {exc}")
    for change in changes:
        print(change)
    if changes:
        raise SystemExit(
            f"statefed schema: {len(changes)} breaking change(s) since {baseline}: clients "
            f"written against it may fail; change the catalogue back, or tell them"
        )
    print(f"statefed schema: no breaking change since {baseline}", file=sys.stderr)


def _schema_refusal(problem: str) -> NoReturn:
    """Exit 2 saying `problem`: a usage error, or a baseline that is no SDL (1 is for a
    breaking change)."""
    print(f"statefed schema: {problem}", file=sys.stderr)
    raise SystemExit(2)


def _fields(env: dict[str, str], subject: str, version: int | None) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

    from pipeline.errors import SourceError
    from tooling.registeredfields import derive, render

    url = ToolingConfig.from_env(env).registry_url
    wanted = f"version {version}" if version is not None else "the newest version"
    try:
        with SchemaRegistryClient({"url": url}) as client:
            registered = client.get_version(subject, version if version is not None else "latest")
    except SchemaRegistryError as exc:
        raise SystemExit(
            f"statefed fields: {wanted} of subject {subject!r} is not in the Schema Registry at "
            f"{url} ({exc}): check the subject's name (`<topic>-value`) and STATEFED_REGISTRY_URL"
        ) from exc
    except Exception as exc:  # the client's transport: refused, timed out, no such host
        raise SystemExit(
            f"statefed fields: the Schema Registry at {url} did not answer ({exc}): start it "
            f"(statefed registry) or set STATEFED_REGISTRY_URL"
        ) from exc
    schema_type = registered.schema.schema_type or "AVRO"
    try:
        derived = derive(schema_type, registered.schema.schema_str, subject, registered.schema_id)
    except (SourceError, ValueError) as exc:  # a .proto that does not compile, bad JSON
        raise SystemExit(f"statefed fields: {wanted} of subject {subject!r}: {exc}") from exc
    print(
        f"# subject {subject}, version {registered.version} (schema id "
        f"{registered.schema_id}), {schema_type}: a view's value_fields"
    )
    print(render(derived))


def _init(directory: Path) -> None:
    from tooling.scaffold import ScaffoldError, scaffold

    try:
        written = scaffold(directory)
    except (ScaffoldError, OSError) as exc:
        raise SystemExit(f"statefed init: {exc}") from exc
    for path in written:
        print(f"wrote {path}")
    print(f"Next: the steps in {directory / 'README.md'}")


def _demo(env: dict[str, str]) -> None:
    from tooling.demo import run_demo

    run_demo(env)


if __name__ == "__main__":
    main()
