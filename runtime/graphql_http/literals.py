"""Documents that differ only in the literal values of their field arguments share one plan:
the document with those literals turned into variables, parsed and validated once.

`scan` reads a query text with one regular expression (a few microseconds) into a signature,
in which each literal argument value of a field (a string, number, boolean, enum value, or a
list of those) is a slot, and the literals themselves. Equal literals share a slot, so that
validation compares the arguments of two fields of one response key exactly as it would
compare the literals. `Plan.build` parses the first text of a signature, gives each slot a
variable declared with the type the schema gives at its position (TypeInfo, once), and
`Plan.bind` turns a request's literals into values for those variables, or None when one of
them does not coerce exactly as the literal would (the request then takes the exact-text
path, whose validation errors it gets). Anything unusual falls back to that path too:
mutations and subscriptions, fragments, directives, names starting with `__` but
`__typename`, block strings, escapes other than JSON's, lists of anything but scalars,
unknown arguments, more tokens than the limit. Errors point into the plan's text; `Bound`
moves their locations to the same tokens of the request's text. `Skeletons` remembers, per
text with its string and number literals taken out, where its literals go, so that the
texts of one client's query (one key after another) are scanned with two C regex calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import orjson
from graphql import (
    ArgumentNode,
    DocumentNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    GraphQLSchema,
    NameNode,
    OperationDefinitionNode,
    Source,
    TypeInfo,
    TypeInfoVisitor,
    Undefined,
    VariableDefinitionNode,
    VariableNode,
    Visitor,
    get_location,
    parse_type,
    visit,
)

__all__ = ["Bound", "Plan", "Scan", "Skeletons", "scan"]

# every token of a text, and its comments: one C call (re.findall); a character GraphQL
# ignores (whitespace, commas, BOM) is in no token, any other character that starts no token
# is one of its own, which the scan refuses (the text then takes the exact-text path, whose
# parser says what is wrong). A run of number characters is one token, checked by _NUMBER.
# possessive (`++`, `*+`): a string's parts start with different characters, so giving one
# back never lets the closing quote match; not trying it saves the regex engine the work
_STRING = (
    r'"(?:[^"\\\x00-\x1f\ud800-\udfff]++|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9A-Fa-f]{4})*+"'
)
_NUMBER_RUN = r"-?[0-9][0-9A-Za-z_.+\-]*"
_TOKENS = re.compile(
    r'"""'
    rf"|{_STRING}"
    rf"|{_NUMBER_RUN}"
    r"|[_A-Za-z][_0-9A-Za-z]*"
    r"|\.\.\."
    r"|#[^\n\r\ud800-\udfff]*"
    r"|[^ \t\n\r,\ufeff]"
)
# the string and number tokens of a text without comments and block strings and, between
# them, the rest, in one C call (`re.split` of `Skeletons`); a number run starts where no
# name goes on. Each branch starts with a character (not a lookbehind), so the regex engine
# skips ahead to the characters that can start one.
_LITERAL_SPLIT = re.compile(
    rf"({_STRING}"
    r"|(?:-[0-9](?<![_0-9A-Za-z]-[0-9])|[0-9](?<![_0-9A-Za-z][0-9]))[0-9A-Za-z_.+\-]*+)"
)
_SLOT = re.compile(r"\$[0-9]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_PUNCTUATORS = frozenset(["!", "$", "&", "(", ")", "...", ":", "=", "@", "[", "]", "{", "|", "}"])
_OPEN, _CLOSE = "{([", "})]"
_REFUSED = frozenset({"@", "..."})  # directives, fragments
_REFUSED_NAMES = frozenset({"mutation", "subscription", "fragment"})  # outside any braces
_NAME_START = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1

# one literal: its kind ("s" string, "i" int, "f" float, "b" boolean, "e" enum value or
# null, "l" list) and its value (a decoded string, the raw text of a number or name, or a
# tuple of literals); equal literals print equally, as validation compares them
Literal = tuple[str, Any]


class _Refused(Exception):
    """The text has something the scan does not handle."""


@dataclass(frozen=True, slots=True)
class Scan:
    """A query text read for its literals: the `signature` (the text's tokens with a slot
    for each literal argument value), each slot's literal, and which token starts each
    literal argument value, with its slot."""

    signature: str
    literals: tuple[Literal, ...]
    occurrences: tuple[tuple[int, int], ...]  # (index of the token, slot)


def scan(text: str, max_tokens: int) -> Scan | None:
    """The literals of `text`; None when it has none or anything unusual (see above)."""
    tokens = [t for t in _TOKENS.findall(text) if t[0] != "#"]
    if len(tokens) >= max_tokens:
        return None
    try:
        return _read(tokens, None)
    except _Refused:
        return None


def _read(tokens: list[str], firsts: list[int] | None) -> Scan | None:
    """The scan of `tokens` (None: no literal); with `firsts`, appends which token starts
    each part of the signature (a list literal is one part of several tokens). One loop of
    local names: this runs for every request with literals."""
    parts: list[str] = []
    slots: dict[Literal, int] = {}
    occurrences: list[tuple[int, int]] = []
    stack: list[str] = []
    previous = ""
    index, count = 0, len(tokens)
    while index < count:
        token = tokens[index]
        first = token[0]
        if firsts is not None:
            firsts.append(index)
        # a value of a field's argument: after ":" in parentheses inside braces
        if previous == ":" and len(stack) > 1 and stack[-1] == "(" and token != "null":
            start = index
            if token == "[":
                items = []
                index += 1
                while index < count and tokens[index] != "]":
                    if tokens[index] in _PUNCTUATORS:
                        raise _Refused  # nested lists, objects, variables
                    items.append(_literal(tokens[index]))
                    index += 1
                if index == count:
                    raise _Refused
                literal: Literal = ("l", tuple(items))
            elif first in _PUNCTUATORS:
                literal = ("", None)  # "$" or "{": not a literal
            else:
                literal = _literal(token)
            if literal[0]:
                slot = slots.setdefault(literal, len(slots))
                occurrences.append((start, slot))
                parts.append(f"${slot}")
                previous = "]"
                index += 1
                continue
        if first in _NAME_START:
            if (first == "_" and token[:2] == "__" and token != "__typename") or (
                not stack and token in _REFUSED_NAMES
            ):
                raise _Refused
        elif token in _PUNCTUATORS:
            if token in _OPEN:
                stack.append(token)
            elif token in _CLOSE:
                if not stack or _OPEN.index(stack.pop()) != _CLOSE.index(token):
                    raise _Refused
            elif token in _REFUSED:
                raise _Refused
        else:
            _literal(token)  # a literal elsewhere (a default value, in an object)
        parts.append(token)
        previous = token
        index += 1
    if not occurrences or stack:
        return None
    return Scan(" ".join(parts), tuple(slots), tuple(occurrences))


def _literal(token: str) -> Literal:
    first = token[0]
    if first == '"':
        if len(token) < 2 or token == '"""':
            raise _Refused  # a block string, a string the token pattern does not take
        return "s", orjson.loads(token) if "\\" in token else token[1:-1]
    if first == "-" or first.isdigit():
        number = _NUMBER.fullmatch(token)
        if number is None:
            raise _Refused
        return ("f" if number.group(1) or number.group(2) else "i"), token
    if first in _NAME_START:
        return ("b" if token in ("true", "false") else "e"), token
    raise _Refused


def part_starts(text: str) -> list[int]:
    """Where each part of the signature of `text` (a text `scan` accepted) starts in it."""
    matches = [m for m in _TOKENS.finditer(text) if text[m.start()] != "#"]
    firsts: list[int] = []
    _read([m.group() for m in matches], firsts)
    return [matches[index].start() for index in firsts]


def token_starts(text: str) -> list[int]:
    """Where each token of `text` starts, comments left out (a text `scan` accepted)."""
    return [m.start() for m in _TOKENS.finditer(text) if text[m.start()] != "#"]


# -- texts that differ only in string and number literals ----------------------------------

_Source = tuple[str, Any]  # ("t", index of a literal token), ("c", a literal), ("l", sources)


class _Template:
    """How the scan of every text of one skeleton goes: the signature's text around its
    slots, and where each slot's literal comes from."""

    def __init__(
        self, pieces: list[str], sources: list[_Source], indexes: list[int], count: int
    ) -> None:
        self.pieces = pieces
        self.sources = sources
        self.indexes = indexes  # the token each slot's literal starts at
        self.count = count  # literal tokens
        # the scan when no two literals are equal (the usual case): a slot per source, in
        # order, so the signature and occurrences are the same for every such text
        self.distinct_signature = (
            "".join(f"{piece}${n}" for n, piece in enumerate(pieces[:-1])) + pieces[-1]
        )
        self.distinct_occurrences = tuple((index, n) for n, index in enumerate(indexes))

    @classmethod
    def of(cls, text: str, found: Scan) -> _Template | None:
        """The template of the skeleton of `text`, scanned as `found`; None when its
        literal tokens are not all in slots (the others are in the signature as they are)."""
        tokens = [t for t in _TOKENS.findall(text) if t[0] != "#"]
        literal_tokens = _LITERAL_SPLIT.split(text)[1::2]
        at: dict[int, int] = {}  # token index -> literal token index
        for index, token in enumerate(tokens):
            if token[0] == '"' or token[0] == "-" or token[0].isdigit():
                at[index] = len(at)
        if [tokens[i] for i in at] != literal_tokens:
            return None  # a tokenization the fast path cannot follow
        used: set[int] = set()

        def source(index: int) -> _Source:
            if index in at:
                used.add(at[index])
                return "t", at[index]
            return "c", _literal(tokens[index])

        sources: list[_Source] = []
        for index, _ in found.occurrences:
            if tokens[index] == "[":
                end = tokens.index("]", index)
                sources.append(("l", tuple(source(i) for i in range(index + 1, end))))
            else:
                sources.append(source(index))
        if len(used) != len(literal_tokens):
            return None
        indexes = [index for index, _ in found.occurrences]
        return cls(_SLOT.split(found.signature), sources, indexes, len(literal_tokens))

    def fill(self, literal_tokens: list[str]) -> Scan | None:
        """The scan of a text of this skeleton with these literal tokens."""
        if len(literal_tokens) != self.count:
            return None
        try:
            literals = tuple([_resolve(source, literal_tokens) for source in self.sources])
        except _Refused:
            return None
        if len(literals) == 1 or len(set(literals)) == len(literals):
            return Scan(self.distinct_signature, literals, self.distinct_occurrences)
        return self._fill_shared(literals)

    def _fill_shared(self, literals: tuple[Literal, ...]) -> Scan:
        """The scan of a text where some literals are equal: they share a slot."""
        pieces = self.pieces
        out = [pieces[0]]
        slots: dict[Literal, int] = {}
        occurrences = []
        for n, literal in enumerate(literals):
            slot = slots.setdefault(literal, len(slots))
            occurrences.append((self.indexes[n], slot))
            out.append(f"${slot}")
            out.append(pieces[n + 1])
        return Scan("".join(out), tuple(slots), tuple(occurrences))


def _resolve(source: _Source, literal_tokens: list[str]) -> Literal:
    kind, value = source
    if kind == "t":
        return _literal(literal_tokens[value])
    if kind == "c":
        return cast(Literal, value)
    return "l", tuple(_resolve(item, literal_tokens) for item in value)


class Skeletons:
    """`scan` with a memo: texts that differ only in their string and number literals (the
    same skeleton, found with two C calls) are scanned from a template built once, at most
    `size` of them kept. Texts with comments, block strings or NUL are scanned in full."""

    def __init__(self, max_tokens: int, size: int) -> None:
        self._max_tokens = max_tokens
        self._size = size
        self._templates: dict[str, _Template | None] = {}

    def scan(self, text: str) -> Scan | None:
        if "#" in text or '"""' in text or "\x00" in text:
            return scan(text, self._max_tokens)
        parts = _LITERAL_SPLIT.split(text)  # the rest, a literal token, the rest, ...
        skeleton = "\x00".join(parts[0::2])
        templates = self._templates
        if skeleton in templates:
            template = templates[skeleton]
            if template is None:
                return scan(text, self._max_tokens)
            return template.fill(parts[1::2])
        found = scan(text, self._max_tokens)
        if len(templates) >= self._size:
            del templates[next(iter(templates))]  # the oldest
        templates[skeleton] = None if found is None else _Template.of(text, found)
        return found


# -- binding a literal to the type of its position ------------------------------------------


class _Unbound(Exception):
    """A literal that does not coerce to its position's type exactly as a variable would."""


def _value(literal: Literal, of: GraphQLInputType) -> Any:
    """The variable value that coerces to `of` as `literal` does as a literal."""
    kind, raw = literal
    if isinstance(of, GraphQLNonNull):
        of = of.of_type
    if isinstance(of, GraphQLList):
        if kind == "l":
            return [_item(item, of.of_type) for item in raw]
        return _value(literal, of.of_type)  # one value stands for a list of it
    if kind == "l":
        raise _Unbound
    if isinstance(of, GraphQLEnumType):
        if kind == "e" and raw in of.values:
            return raw
        raise _Unbound
    if not isinstance(of, GraphQLScalarType):
        raise _Unbound  # an input object
    return _scalar(kind, raw, of)


def _item(literal: Literal, of: GraphQLInputType) -> Any:
    if literal != ("e", "null"):
        return _value(literal, of)
    if isinstance(of, GraphQLNonNull):
        raise _Unbound
    return None


def _scalar(kind: str, raw: Any, of: GraphQLScalarType) -> Any:
    name = of.name
    if name == "String" and kind == "s":
        return raw
    if name == "ID" and kind in ("s", "i"):
        return raw  # an Int literal is an ID of its text
    if name == "Int" and kind == "i" and _INT_MIN <= int(raw) <= _INT_MAX:
        return int(raw)
    if name == "Float" and kind in ("i", "f") and math.isfinite(number := float(raw)):
        return number
    if name == "Boolean" and kind == "b":
        return raw == "true"
    if name in ("String", "ID", "Int", "Float", "Boolean"):
        raise _Unbound
    return _custom(kind, raw, of)


def _custom(kind: str, raw: Any, of: GraphQLScalarType) -> Any:
    """A custom scalar whose literals are parsed as its variables are (graphql-core's
    default `parse_literal` over the untyped value): that value, when it coerces."""
    if of.coerce_input_literal is not None or "parse_literal" in vars(of):
        raise _Unbound
    value: Any = raw  # a string, an enum value's name
    if kind == "i":
        value = int(raw)
    elif kind == "f":
        value = float(raw)
    elif kind == "b":
        value = raw == "true"
    try:
        coerced = of.coerce_input_value(value)
    except Exception as exc:  # any error of a scalar's parser means the literal is invalid
        raise _Unbound from exc
    if coerced is Undefined:
        raise _Unbound
    return value


# -- the plan of a signature ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Variable:
    name: str
    slot: int
    type: GraphQLInputType


class Plan:
    """The document of one signature with its literal argument values turned into variables
    (`document`), what each variable takes, and where each part of the signature starts in
    the text it was built from (to move error locations)."""

    def __init__(
        self, document: DocumentNode, variables: tuple[_Variable, ...], starts: Sequence[int]
    ) -> None:
        self.document = document
        self.variables = variables
        self.tokens = {start: index for index, start in enumerate(starts)}

    @classmethod
    def build(cls, schema: GraphQLSchema, document: DocumentNode, found: Scan) -> Plan | None:
        """The plan of `document` (parsed from the text `found` was scanned from); None when
        a literal's position has no type (the document is invalid) or a literal is where
        the scan did not expect it."""
        assert document.loc is not None  # parsed with locations
        starts = token_starts(document.loc.source.body)
        slot_at = {starts[index]: slot for index, slot in found.occurrences}
        typed = _Typer(TypeInfo(schema), slot_at)
        visit(document, TypeInfoVisitor(typed.type_info, typed))
        if typed.failed or len(typed.names) != len(slot_at):
            return None
        planned = visit(document, _Planner(typed))
        return cls(planned, tuple(typed.variables.values()), part_starts(document.loc.source.body))

    def bind(self, found: Scan) -> dict[str, Any] | None:
        """The variables standing for the literals of `found` (a scan of this plan's
        signature); None when one does not coerce as its literal would."""
        try:
            return {v.name: _value(found.literals[v.slot], v.type) for v in self.variables}
        except _Unbound:
            return None


class _Typer(Visitor):
    """The type at each literal's position, and a variable per slot and type."""

    def __init__(self, type_info: TypeInfo, slot_at: dict[int, int]) -> None:
        super().__init__()
        self.type_info = type_info
        self._slot_at = slot_at
        self.variables: dict[tuple[int, str], _Variable] = {}
        self.names: dict[int, str] = {}  # literal offset -> its variable's name
        self.per_operation: dict[int, list[_Variable]] = {}
        self._operation: list[_Variable] = []
        self.failed = False

    def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
        self._operation = self.per_operation.setdefault(id(node), [])

    def enter_argument(self, node: ArgumentNode, *_: Any) -> None:
        loc = node.value.loc
        slot = None if loc is None else self._slot_at.get(loc.start)
        if slot is None or loc is None:
            return
        of = self.type_info.get_input_type()
        if of is None:
            self.failed = True
            return
        key = (slot, str(of))
        variable = self.variables.get(key)
        if variable is None:
            variable = self.variables[key] = _Variable(f"__l{len(self.variables)}", slot, of)
        if variable not in self._operation:
            self._operation.append(variable)
        self.names[loc.start] = variable.name


class _Planner(Visitor):
    """The document with each literal argument value replaced by its variable, declared by
    its operation."""

    def __init__(self, typed: _Typer) -> None:
        super().__init__()
        self._typed = typed

    def leave_argument(self, node: ArgumentNode, *_: Any) -> ArgumentNode | None:
        loc = node.value.loc
        name = None if loc is None else self._typed.names.get(loc.start)
        if name is None:
            return None
        return replace(node, value=VariableNode(name=NameNode(value=name), loc=loc))

    def enter_operation_definition(
        self, node: OperationDefinitionNode, *_: Any
    ) -> OperationDefinitionNode | None:
        added = self._typed.per_operation.get(id(node))
        if not added:
            return None
        definitions = tuple(
            VariableDefinitionNode(
                variable=VariableNode(name=NameNode(value=v.name)),
                type=parse_type(str(v.type)),
                directives=(),
            )
            for v in added
        )
        # visited again with its new definitions (whose variables are no arguments)
        return replace(
            node, variable_definitions=(*(node.variable_definitions or ()), *definitions)
        )


# -- one request's literals -----------------------------------------------------------------


@dataclass(slots=True)
class Bound:
    """The plan of one query text and the values of its literals."""

    plan: Plan
    values: dict[str, Any]
    text: str

    def variables(self, given: dict[str, Any] | None) -> dict[str, Any]:
        """The request's own variables with the literals' values."""
        return {**given, **self.values} if given else dict(self.values)

    def relocate(self, errors: Sequence[GraphQLError]) -> Sequence[GraphQLError]:
        """`errors` located in this text (not in the plan's): each position moved to the
        start of the same part of the signature here."""
        starts: list[int] | None = None
        source = None
        for error in errors:
            if not error.locations or not error.positions:
                continue
            if starts is None:
                starts, source = part_starts(self.text), Source(self.text)
            assert source is not None
            indexes = [self.plan.tokens.get(p) for p in error.positions]
            error.locations = [
                get_location(source, starts[i])
                for i in indexes
                if i is not None and i < len(starts)
            ]
        return errors
