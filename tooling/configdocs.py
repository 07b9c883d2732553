"""`python -m tooling.configdocs`: the configuration reference, `docs/configuration.md`,
rendered from the declarations of the settings every part reads (`runtime.config.setting`).

The variable, its default, what it accepts and which parts read it come from the
declarations; what it means is the declaration's `doc`. The few variables read outside a
configuration dataclass are listed here (`_FAMILIES`, `_OUTSIDE`). `make docs` writes the
page with `--write`; `--check` exits 1 when the committed page differs, and
`tests/test_docs.py` fails on it, so the page cannot fall behind the code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.config import GatewayConfig
from node.config import NodeConfig
from pipeline.config import PipelineConfig
from runtime.config import Declaration, declarations
from runtime.kafka import CONFIG_VARIABLE, KafkaClientConfig
from runtime.otel import OtelConfig
from tooling.broker import KAFKA_VERSION
from tooling.config import ToolingConfig

__all__ = ["PARTS", "Part", "Row", "main", "render", "rows"]

_SHARED = "Shared by several parts"


@dataclass(frozen=True)
class Part:
    """A part whose configuration dataclass the reference documents, in a section of its own."""

    config: type
    name: str  # in the "read by" column
    title: str
    intro: str


# one section each, in this order; a variable declared by several parts is listed once, in
# the first section, which names every part that reads it
PARTS: tuple[Part, ...] = (
    Part(
        ToolingConfig,
        "`statefed`",
        "The `statefed` command",
        "Read by the command line itself: the catalogue it gives every part it starts, and the "
        "settings of `statefed broker`, `topics`, `produce`, `demo` and `status`.",
    ),
    Part(
        PipelineConfig,
        "pipeline",
        "Pipeline",
        "Read by `statefed pipeline` (the Spark driver), also under spark-submit; see "
        "[The pipeline on a Spark cluster](operations.md#the-pipeline-on-a-spark-cluster).",
    ),
    Part(NodeConfig, "node", "Node", "Read by `statefed node`."),
    Part(GatewayConfig, "gateway", "Gateway", "Read by `statefed gateway`."),
    Part(
        OtelConfig,
        "gateway, node",
        "Traces (OpenTelemetry)",
        "The standard variables that switch span export on, read by the gateway and the nodes "
        "with the `otel` extra installed; the exporter reads the other `OTEL_*` variables "
        "itself (headers, `OTEL_BSP_SCHEDULE_DELAY`).",
    ),
)


@dataclass(frozen=True)
class Row:
    """One variable of the reference."""

    variable: str
    read_by: tuple[str, ...]
    default: str
    accepts: str
    meaning: str


# the Kafka client settings: a family of variables read by `runtime.kafka.KafkaProperties`,
# a `settings_group` field of every part with Kafka clients
_FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    (
        CONFIG_VARIABLE,
        "unset",
        "a path",
        "a Kafka client properties file (TLS, SASL, any librdkafka setting) for every Kafka "
        "client; see [Kafka client settings](operations.md#kafka-client-settings)",
    ),
    (
        "STATEFED_KAFKA_<KEY>",
        "unset",
        "text",
        "one librdkafka setting (`STATEFED_KAFKA_SECURITY_PROTOCOL` is `security.protocol`); "
        f"wins over `{CONFIG_VARIABLE}`",
    ),
    (
        "STATEFED_KAFKA_<KEY>_FILE",
        "unset",
        "a path",
        "the same setting's value read from a file (`STATEFED_KAFKA_SASL_PASSWORD_FILE`)",
    ),
)

# read by `tooling.broker.kafka_jars`, outside a configuration dataclass
_OUTSIDE: dict[type, tuple[tuple[str, str, str, str], ...]] = {
    ToolingConfig: (
        (
            "STATEFED_BROKER_JARS",
            f"the checkout's `.cache/kafka/{KAFKA_VERSION}`",
            "a path",
            "Apache Kafka's jars the local broker runs from (`make kafka` puts them there)",
        ),
    ),
}


def _number(value: float) -> str:
    number = int(value) if float(value).is_integer() else value
    if isinstance(number, int) and number >= 10**9:
        if number & (number - 1) == 0:
            return f"2^{number.bit_length() - 1}"
        if str(number).rstrip("0") == "1":
            return f"10^{len(str(number)) - 1}"
    return f"{number:,}" if isinstance(number, int) else str(number)


_PARSE_NAMES: dict[Callable[[str], object], str] = {
    Path: "a path",
    str: "text",
    str.lower: "text",
    int: "an integer",
}


def _accepts(declaration: Declaration) -> str:
    """What a value must be: the checks `runtime.config` applies, in words."""
    if declaration.choices is not None:
        return "one of " + ", ".join(f"`{choice}`" for choice in declaration.choices)
    if declaration.kind is bool:
        return "`true` or `false`"
    if declaration.kind in (int, float):
        kind = "an integer" if declaration.kind is int else "a number"
        low, high = declaration.low, declaration.high
        if low is not None and high is not None:
            return f"{kind} in {_number(low)}..{_number(high)}"
        if low is not None:
            return f"{kind} >= {_number(low)}"
        return kind if high is None else f"{kind} <= {_number(high)}"
    if declaration.kind is Path:
        return "a path"
    if declaration.kind is str:
        return "text"
    return _PARSE_NAMES.get(declaration.parse, "see meaning")


def _default(declaration: Declaration) -> str:
    if declaration.shown_default is not None:
        return declaration.shown_default
    value = declaration.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list | frozenset) and not value:
        return "none"
    return f"`{value}`"


def _row(variable: str, found: list[tuple[str, Declaration]]) -> Row:
    """One row from every declaration of `variable`: they must agree on what users see."""
    docs = {declaration.doc for _, declaration in found if declaration.doc}
    if len(docs) != 1:
        problem = "has no doc" if not docs else "has different docs in different parts"
        raise ValueError(f"{variable} {problem}: give its setting(...) one doc=")
    shown = {(_default(declaration), _accepts(declaration)) for _, declaration in found}
    if len(shown) != 1:
        raise ValueError(f"{variable} is declared with different defaults or checks: {shown}")
    meaning = docs.pop()
    if "|" in meaning or "\n" in meaning:
        raise ValueError(f"{variable}: its doc must fit one table cell (no '|', no newline)")
    (default, accepts) = shown.pop()
    parts = tuple(dict.fromkeys(part for part, _ in found))
    return Row(variable, parts, default, accepts, meaning)


def rows(parts: Sequence[Part] = PARTS) -> dict[str, list[Row]]:
    """The reference's rows by section title; variables shared by parts come first. Raises
    ValueError naming a variable without a doc, or declared differently by two parts."""
    found: dict[str, list[tuple[str, Declaration]]] = {}
    for part in parts:
        for declaration in declarations(part.config):
            found.setdefault(declaration.variable, []).append((part.name, declaration))
    every = {variable: _row(variable, declared) for variable, declared in found.items()}
    kafka = tuple(part.name for part in parts if issubclass(part.config, KafkaClientConfig))
    sections = {_SHARED: [row for row in every.values() if len(row.read_by) > 1]}
    sections[_SHARED] += [Row(v, kafka, d, a, m) for v, d, a, m in _FAMILIES if kafka]
    for part in parts:
        own = [row for row in every.values() if row.read_by == (part.name,)]
        own += [Row(v, (part.name,), d, a, m) for v, d, a, m in _OUTSIDE.get(part.config, ())]
        sections[part.title] = own
    return sections


_HEADER = """\
<!-- Generated by `python -m tooling.configdocs --write docs/configuration.md` (`make docs`)
from the settings' declarations (`setting(..., doc=...)` in gateway/config.py,
node/config.py, pipeline/config.py, tooling/config.py and runtime/otel.py): edit those,
not this page. tests/test_docs.py fails when it is stale. -->

# Configuration reference

Every part reads its configuration from environment variables, with the `STATEFED_` prefix.
A flag of `statefed <part>` (`statefed <part> --help` lists them) is a shorthand for one of
them and wins over it, so a flag, an exported variable and a compose file's `environment:`
are the same thing.

Every part reads its variables with the same reader (`runtime.config`) and validates them
at start-up: a variable that is unset or empty (`VAR=`) keeps its default; surrounding
whitespace is ignored; booleans are `true`/`false`, `1`/`0`, `yes`/`no` or `on`/`off`;
durations are milliseconds (`_MS`). An invalid value stops the part with an error that
names the variable and says what it accepts, e.g.
`statefed node: STATEFED_NODE_PORT: must be an integer in 1..65535, got 'x'` (`--port
(STATEFED_NODE_PORT): ...` where the value was given as that flag).

The topic pages explain the settings in context: [Querying](querying.md),
[Operations](operations.md), [Security](security.md).
"""


def _table(section: list[Row], with_parts: bool) -> list[str]:
    head = ["variable", *(["read by"] if with_parts else []), "default", "accepts", "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in section:
        cells = [f"`{row.variable}`", row.default, row.accepts, row.meaning]
        if with_parts:
            cells.insert(1, ", ".join(row.read_by))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render(parts: Sequence[Part] = PARTS) -> str:
    """The whole page."""
    lines = [_HEADER]
    intros = {part.title: part.intro for part in parts}
    intros[_SHARED] = "Read by more than one part: give every part that reads one the same value."
    for title, section in rows(parts).items():
        if not section:
            continue
        lines.extend((f"## {title}\n", intros[title] + "\n"))
        lines.extend(_table(section, with_parts=title == _SHARED))
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tooling.configdocs", description=__doc__)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", type=Path, metavar="PATH", help="write the page to PATH")
    action.add_argument("--check", type=Path, metavar="PATH", help="exit 1 if PATH differs")
    args = parser.parse_args(argv)
    page = render()
    if args.write is not None:
        args.write.write_text(page, encoding="utf-8")
    elif args.check is not None:
        if not args.check.is_file() or args.check.read_text(encoding="utf-8") != page:
            print(f"{args.check} is stale: run `make docs`", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
