"""Byte-ordered encoding of LevelDB keys: tuples of strings and non-negative integers.

`pack(a, b, ...)` orders the same as the tuple `(a, b, ...)`: integers are fixed-width
big-endian (`>Q`, so byte order = numeric order), strings are UTF-8 (byte order = code
point order) with 0x00 escaped as 0x00 0xFF and terminated by 0x00 0x01, so a string
never runs into the part after it and a prefix sorts first. Every tuple element carries
a one-byte type tag.
"""

from __future__ import annotations

import struct

__all__ = [
    "MAX_UINT",
    "STR_TAG",
    "KeyPart",
    "escape_str",
    "pack",
    "pack_str",
    "pack_uint",
    "prefix",
    "unpack",
]

KeyPart = str | int
MAX_UINT = (1 << 64) - 1

_INT_TAG = b"\x01"
_STR_TAG = STR_TAG = b"\x02"
_UINT = struct.Struct(">Q")
_STR_END = b"\x00\x01"
_ESCAPED_NUL = b"\x00\xff"


def escape_str(part: str) -> bytes:
    """The UTF-8 of `part` with NUL escaped, unterminated: byte by byte, so the escape of a
    string's prefix is a prefix of its escape (`STR_TAG + escape_str(p)` starts every packed
    string that starts with p)."""
    data = part.encode("utf-8")
    return data.replace(b"\x00", _ESCAPED_NUL) if b"\x00" in data else data


def pack_str(part: str) -> bytes:
    """`pack(part)` for one string, without the dispatch (keys are packed per record)."""
    return _STR_TAG + escape_str(part) + _STR_END


def pack_uint(part: int) -> bytes:
    """`pack(part)` for one integer, without the dispatch."""
    if not 0 <= part <= MAX_UINT:
        raise ValueError(f"integer key part {part} is outside 0..2**64-1")
    return _INT_TAG + _UINT.pack(part)


def _pack_part(part: KeyPart) -> bytes:
    # exact types first: bool is an int subclass and must be refused
    if type(part) is str:
        return pack_str(part)
    if type(part) is int:
        return pack_uint(part)
    if isinstance(part, bool):
        raise TypeError("bool is not a key part; use int 0/1 explicitly")
    if isinstance(part, int):
        return pack_uint(part)
    if isinstance(part, str):
        return pack_str(part)
    raise TypeError(f"key part must be str or int, got {type(part).__name__}")


def pack(*parts: KeyPart) -> bytes:
    """Encode `parts` so that byte order equals tuple order; `pack(a, b) == pack(a) +
    pack(b)`, so a packed prefix can be computed once and extended."""
    return b"".join([_pack_part(p) for p in parts])


def prefix(*parts: KeyPart) -> bytes:
    """The key prefix shared by every packed tuple that starts with `parts`."""
    return pack(*parts)


def unpack(data: bytes) -> tuple[KeyPart, ...]:
    """Decode a key made by `pack`."""
    parts: list[KeyPart] = []
    i = 0
    while i < len(data):
        tag = data[i : i + 1]
        i += 1
        if tag == _INT_TAG:
            parts.append(_UINT.unpack_from(data, i)[0])
            i += _UINT.size
        elif tag == _STR_TAG:
            out = bytearray()
            while True:
                j = data.index(b"\x00", i)
                out += data[i:j]
                marker = data[j + 1 : j + 2]
                i = j + 2
                if marker == b"\x01":
                    break
                if marker != b"\xff":
                    raise ValueError(f"bad string escape at byte {j} of key {data!r}")
                out += b"\x00"
            parts.append(out.decode("utf-8"))
        else:
            raise ValueError(f"unknown key part tag {tag!r} at byte {i - 1} of key {data!r}")
    return tuple(parts)
