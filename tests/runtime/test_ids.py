"""Ids come from a generator of their own: drawing them leaves the `random` module's shared
state alone, and a forked child does not repeat its parent's ids."""

from __future__ import annotations

import random
import subprocess
import sys

from runtime.graphql_http.request import request_id
from runtime.tracing import Trace


def test_ids_leave_the_shared_random_state_alone() -> None:
    before = random.getstate()
    request_id(None)
    Trace.new().child()
    assert random.getstate() == before


# run in an interpreter of its own: forking the test process, with threads of other tests
# alive, is what Python warns about
_FORKED = """
import os
from runtime.graphql_http.request import request_id
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, request_id(None).encode())
    os._exit(0)
os.close(write)
child = os.read(read, 64).decode()
os.waitpid(pid, 0)
print(child, request_id(None))
"""


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=60, check=True
    )
    child, parent = done.stdout.split()
    assert len(child) == len(parent) == 32
    assert child != parent
