"""What a benchmark run found: one section per measurement, plus number formatting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Report", "Section", "Table", "fmt_bytes", "fmt_ms", "fmt_num", "fmt_ratio"]


def fmt_num(value: float | None, digits: int = 0) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def fmt_ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.2f} ms" if value < 100 else f"{value:,.0f} ms"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}x"


def fmt_bytes(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value / (1 << 20):,.1f} MiB"


@dataclass
class Table:
    """A Markdown table: header cells and rows of already formatted cells."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def markdown(self) -> str:
        lines = [
            "| " + " | ".join(self.headers) + " |",
            "|" + "|".join("---" for _ in self.headers) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass
class Section:
    """The figures (JSON), tables, notes and errors of one measurement."""

    name: str
    title: str
    figures: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # per step: average cores used by this run's processes ("own") and by others ("other")
    cpu: list[dict[str, float]] = field(default_factory=list)

    def table(self, *headers: str) -> Table:
        table = Table(list(headers))
        self.tables.append(table)
        return table

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "figures": self.figures,
            "notes": self.notes,
            "errors": self.errors,
            "seconds": round(self.seconds, 1),
            "cpu_cores": self.cpu,
        }


@dataclass
class Report:
    """Sections in the order measurements first reported into them."""

    sections: dict[str, Section] = field(default_factory=dict)

    def section(self, name: str, title: str) -> Section:
        if name not in self.sections:
            self.sections[name] = Section(name, title)
        return self.sections[name]

    def figure(self, name: str, *path: str) -> Any:
        """A figure by section and key path, or None when it was not measured."""
        value: Any = self.sections[name].figures if name in self.sections else None
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value
