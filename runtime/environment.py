"""Setting environment variables for a while: for what this process starts (a JVM reads
its options from the environment it is started with), then restoring them, so that
what it starts later does not inherit them."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["environment"]


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `values` set, each variable restored (or unset) afterwards."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
