"""Random bits for ids that must be unique, not secret (request, trace and span ids).

One generator of this module's own: the `random` module's shared state is left to the code
that seeds or watches it (hypothesis does), and it is ~10x cheaper than `os.urandom`. A
forked child reseeds it, so parent and child never hand out the same ids.
"""

from __future__ import annotations

import os
from random import Random

__all__ = ["random_bits"]

_ids = Random()
os.register_at_fork(after_in_child=_ids.seed)

random_bits = _ids.getrandbits
