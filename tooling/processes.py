"""Child processes owned by a handle: the demo and the tests start statefed parts with it.

Each part runs as `python -m tooling.cli <part>` with its configuration in the environment,
logs to its own file, and is stopped by its handle: SIGTERM (clean shutdown) or SIGKILL
(a crash, for failure tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar

import httpx

from runtime.tls import client_context

__all__ = [
    "ManagedProcess",
    "ProcessFailed",
    "die_with_parent",
    "wait_until",
    "wait_until_async",
]

_PR_SET_PDEATHSIG = 1
_T = TypeVar("_T")
# what a wait is for: a description, or a function giving one when the wait times out
Described = str | Callable[[], str]


def die_with_parent() -> None:
    """Runs in the child before exec: on Linux, SIGKILL it when its parent dies.

    Parts run in their own session (so Ctrl-C reaches only the launcher, which stops them
    in order); this makes sure a launcher that crashes or is killed leaves no orphans.
    Linux sends the signal when the *thread* that started the child ends, so start parts
    from a thread that outlives them (a part started from `asyncio.to_thread` dies when the
    executor's worker thread exits).
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _prctl() -> Callable[..., int] | None:
    """libc's prctl on Linux, looked up once in the parent: a lookup in the forked child
    (dlopen) could wait for a loader lock another thread of the parent held at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]


_PRCTL = _prctl()


class ProcessFailed(RuntimeError):
    """A managed process exited or did not become ready; names the part and its log."""


@functools.cache
def client_tls() -> ssl.SSLContext:
    """One TLS context for the HTTP clients of tests and tools. httpx builds one per client
    unless given one, also for plain http:// URLs, and building one loads the CA bundle:
    about 37 ms of CPU. Each call of `httpx.get` or `httpx.post` builds a client, so a
    poll every 0.2 s that way kept a fifth of a core busy."""
    return client_context(None)


def poll_client(timeout_s: float, verify: ssl.SSLContext | None = None) -> httpx.Client:
    """An HTTP client for a loop of requests, to close after it (`with`), on the shared TLS
    context (or `verify`: one trusting a test's own CA). The environment's proxy settings
    are ignored: the parts polled are on loopback."""
    return httpx.Client(timeout=timeout_s, trust_env=False, verify=verify or client_tls())


def wait_until(
    condition: Callable[[], _T | None], timeout_s: float, what: Described, interval_s: float = 0.2
) -> _T:
    """Call `condition` every `interval_s` until it returns a truthy value, and return that.

    At the deadline raise TimeoutError naming `what` (a callable is asked at that moment,
    to describe the state it found) and the condition's last value. `interval_s=0` suits
    a condition that waits itself, e.g. by consuming with a timeout.
    """
    deadline = time.monotonic() + timeout_s
    while not (last := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(_timed_out(timeout_s, what, last))
        time.sleep(interval_s)
    return last


async def wait_until_async(
    condition: Callable[[], Awaitable[_T | None]],
    timeout_s: float,
    what: Described,
    interval_s: float = 0.2,
) -> _T:
    """`wait_until` for a coroutine condition, sleeping with `asyncio.sleep`."""
    deadline = time.monotonic() + timeout_s
    while not (last := await condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(_timed_out(timeout_s, what, last))
        await asyncio.sleep(interval_s)
    return last


def _timed_out(timeout_s: float, what: Described, last: object) -> str:
    described = what if isinstance(what, str) else what()
    found = "" if last is None or isinstance(last, bool) else f" (last: {last!r})"
    return f"timed out after {timeout_s} s waiting for {described}{found}"


class ManagedProcess:
    """One statefed part (`pipeline`, `node`, `gateway`, ...) as a child process."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.args = [sys.executable, "-m", "tooling.cli", *args]
        self.env = dict(env)
        self.log_path = log_path
        self.cwd = cwd  # the process's working directory (the launcher's when None)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        self._log_start = 0  # where this run's lines begin in the log

    @classmethod
    def of_command(
        cls,
        name: str,
        command: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> ManagedProcess:
        """Any program rather than a statefed part (a Spark master or worker, spark-submit,
        the Schema Registry)."""
        process = cls(name, [], env, log_path, cwd)
        process.args = list(command)
        return process

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._log_start = self._log.seek(0, os.SEEK_END)  # a restart appends to the same log
        self._process = subprocess.Popen(
            self.args,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches the launcher only
            preexec_fn=die_with_parent,
        )
        return self

    def running(self) -> bool:
        return self._process is not None and self.returncode is None

    def check_alive(self) -> bool:
        """True while the process runs; ProcessFailed, naming its log and its tail, once
        it exited."""
        if not self.running():
            raise ProcessFailed(
                f"{self.name} exited (code {self.returncode}) before it was ready; "
                f"see its log {self.log_path}:\n{self.log_tail()}"
            )
        return True

    @property
    def returncode(self) -> int | None:
        """The exit status once the process exited (-N: killed by signal N), else None.
        Read without reaping it: an unreaped leader's pid keeps naming its process group,
        so `stop` can still end the children it left (`_exit_status`)."""
        process = self._process
        if process is None:
            return None
        if process.returncode is not None:
            return process.returncode
        return _exit_status(process)

    def log_of_this_run(self) -> str:
        """What the process wrote to its log since its last start."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_log(self, needle: str, timeout_s: float) -> None:
        """Wait until the process has written `needle` to its log in this run: a part
        restarted on the same log (a pipeline after a kill) must not be taken as ready
        for what its previous run wrote."""

        def seen() -> bool:
            if needle in self.log_of_this_run():
                return True
            return not self.check_alive()

        wait_until(seen, timeout_s, f"{self.name} to log {needle!r} ({self.log_path})")

    def wait_for_http(self, url: str, timeout_s: float) -> None:
        """Wait until GET `url` answers 200."""

        def healthy() -> bool:
            self.check_alive()
            try:
                return http.get(url).status_code == 200
            except httpx.HTTPError:
                return False

        with poll_client(timeout_s=1.0) as http:
            wait_until(healthy, timeout_s, f"{self.name} to answer 200 on {url}")

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """Clean shutdown: SIGTERM, then SIGKILL if it does not exit within `timeout_s`."""
        return self._signal_and_reap(signal.SIGTERM, timeout_s)

    def kill(self) -> int | None:
        """A crash: SIGKILL, no shutdown hooks run."""
        return self._signal_and_reap(signal.SIGKILL, 10.0)

    def pause(self) -> None:
        """Freeze the part and its children (SIGSTOP to its process group): alive but silent,
        as in a long GC pause. `resume` lets it run again; `stop` resumes it first."""
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused part run again (SIGCONT); harmless when it was not paused."""
        self._signal_group(signal.SIGCONT)

    def _signal_group(self, sig: signal.Signals) -> None:
        process = self._process
        # an unreaped leader (a zombie at worst) keeps its pid, so its group is still its own
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)

    def _signal_and_reap(self, sig: signal.Signals, timeout_s: float) -> int | None:
        process = self._process
        if process is None:
            return None
        # Only an unreaped leader's pid is sure to still name its process group: once
        # reaped, the pid may belong to an unrelated process, so never signal it then.
        if process.returncode is None:
            if sig == signal.SIGKILL:
                _kill_group(process.pid)
            else:  # not Popen.send_signal, which reaps an exited leader first
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, sig)  # the part shuts its own children down
                self._signal_group(signal.SIGCONT)  # a paused part must run to act on it
            if not _exited_unreaped(process.pid, timeout_s):
                _kill_group(process.pid)
                _exited_unreaped(process.pid, 10.0)
            _kill_group(process.pid)  # stragglers (a JVM whose parent died) must not outlive it
            process.wait(10.0)
        if self._log is not None:
            self._log.close()
            self._log = None
        return process.returncode


def _exit_status(process: subprocess.Popen[bytes]) -> int | None:
    """The exit status of `process` once it exited (-N: killed by signal N), else None; it
    is left unreaped (a zombie), so its pid stays its own. Reaped by someone else, its pid
    may name another process now: it is marked ended (status 0, as Popen marks it then),
    so that nothing signals that pid again."""
    try:
        info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        process.returncode = 0
        return 0
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


def _exited_unreaped(pid: int, timeout_s: float) -> bool:
    """Wait for `pid` to exit, leaving it a zombie so its pid stays reserved."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _kill_group(pid: int) -> None:
    # The part may have children (Spark's JVM and Python workers): they share its group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
