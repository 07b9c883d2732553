"""Screenshots of GraphiQL and the status page for the docs site, taken from a running gateway.

`make demo`, then `python -m tooling.screenshots [--url http://127.0.0.1:8100] [--out
docs/images]`. Headless Chromium (Debian's /usr/bin/chromium, which `make browser`
installs, driven by Playwright as tests/e2e/test_graphiql.py drives it; never `playwright
install`) opens:

- `/graphql`, presses GraphiQL's run button on the example document it opens on and keeps
  the page once the answer pane shows data: `graphiql.png`;
- `/status`, and keeps the whole page once the partition table is filled and the lag chart
  has drawn lines over at least `--history` seconds (the page samples the lag only while it
  is open, so this takes that long): `status.png`.

Every wait has a deadline and names what it waited for when it runs out. The gateway must
be on loopback, and every request the browser makes must stay there: any other is refused
and fails the run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from runtime.hosts import is_loopback

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page, Playwright, Route, ViewportSize

__all__ = [
    "CHROMIUM",
    "FLAGS",
    "ScreenshotError",
    "Traffic",
    "browser",
    "check_gateway",
    "main",
    "run",
    "take_graphiql",
    "take_status",
]

# the browser and flags of every headless Chromium statefed drives (these shots, the
# browser tests): Debian's, which `make browser` installs
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 760}
QUERY_EDITOR = ".graphiql-query-editor .CodeMirror"
RESPONSE = ".graphiql-response .CodeMirror"
LOAD_TIMEOUT_S = 30.0

# GraphiQL parsed its document into one runnable operation (the run button is a button then)
PARSED = """s => (document.querySelector(s)?.CodeMirror?.documentAST?.definitions ?? [])
  .some((d) => d.kind === "OperationDefinition")"""
# the answer pane holds a JSON answer with data
ANSWERED = """s => {
  const text = document.querySelector(s)?.CodeMirror?.getValue() ?? "";
  try { return JSON.parse(text).data != null; } catch { return false; }
}"""
# the partition table has partitions, the page is not showing a problem, and the lag chart has
# lines spanning at least `seconds` of its 5 minutes (its axis line spans the 5 minutes)
STATUS_READY = """seconds => {
  const axis = document.querySelector("#lag line.axis");
  const rows = document.querySelectorAll("#partitions tbody tr[data-partition]");
  if (!axis || !rows.length || !document.getElementById("problem").hidden) return false;
  const perSecond = (axis.x2.baseVal.value - axis.x1.baseVal.value) / 300;
  const spans = [...document.querySelectorAll("#lag polyline")].map((line) => {
    const xs = [...line.points].map((point) => point.x);
    return Math.max(...xs) - Math.min(...xs);
  });
  return spans.length > 0 && Math.max(...spans) >= seconds * perSecond;
}"""


class ScreenshotError(Exception):
    """What failed, said so that the person running the tool knows what to do."""


@dataclass
class Traffic:
    """The browser's requests: loopback ones go through, any other is refused and kept."""

    refused: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def route(self, route: Route) -> None:
        url = route.request.url
        if is_loopback(urlsplit(url).hostname):
            route.continue_()
        else:
            self.refused.append(url)
            route.abort("addressunreachable")

    def check(self, what: str) -> None:
        """Fail if the page made a request beyond loopback or threw an error."""
        if self.refused:
            raise ScreenshotError(f"{what} tried to reach beyond loopback: {self.refused}")
        if self.page_errors:
            raise ScreenshotError(f"{what} threw: {self.page_errors}")


def check_gateway(url: str) -> None:
    """Fail unless `url` is a loopback address where a gateway answers."""
    if not is_loopback(urlsplit(url).hostname):
        raise ScreenshotError(f"{url} is not a loopback address: this tool only talks to loopback")
    try:
        response = httpx.get(f"{url}/status.json", timeout=5.0, trust_env=False)
    except httpx.HTTPError as exc:
        raise ScreenshotError(
            f"the gateway is not answering at {url} ({exc}): start it with `make demo`"
        ) from None
    if response.status_code != 200:
        raise ScreenshotError(
            f"{url}/status.json answered {response.status_code}: is a statefed gateway there "
            "(with authentication off, as in `make demo`)?"
        )


def _check_browser() -> None:
    if shutil.which(CHROMIUM) is None:
        raise ScreenshotError(
            f"Debian's Chromium is not installed at {CHROMIUM}: run `make browser`"
        )


@contextmanager
def browser(traffic: Traffic) -> Iterator[BrowserContext]:
    """Headless Chromium with a throwaway profile, its requests held to loopback."""
    _check_browser()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ScreenshotError("Playwright is not installed: run `make install`") from None
    with (
        tempfile.TemporaryDirectory(prefix="statefed-screenshots-") as profile,
        sync_playwright() as playwright,
    ):
        context = _launch(playwright, profile)
        try:
            context.route("**/*", traffic.route)
            yield context
        finally:
            context.close()


def _launch(playwright: Playwright, profile: str) -> BrowserContext:
    from playwright.sync_api import Error as PlaywrightError

    try:
        return playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport=VIEWPORT,
            color_scheme="light",
        )
    except PlaywrightError as exc:
        raise ScreenshotError(f"{CHROMIUM} did not start ({exc}): run `make browser`") from None


def _open(page: Page, url: str) -> None:
    from playwright.sync_api import Error as PlaywrightError

    try:
        page.goto(url)
    except PlaywrightError as exc:
        raise ScreenshotError(
            f"the browser could not open {url} ({exc}): is the gateway (make demo) still running?"
        ) from None


def _wait(page: Page, what: str, expression: str, arg: Any, timeout_s: float) -> None:
    """Wait for `expression(arg)` to hold in `page`, failing with `what` after `timeout_s`."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(expression, arg=arg, timeout=timeout_s * 1000, polling=250)
    except PlaywrightTimeout:
        raise ScreenshotError(f"{what}: not within {timeout_s:.0f} s") from None


def _page(context: BrowserContext, traffic: Traffic) -> Page:
    page = context.pages[0] if context.pages else context.new_page()
    page.on("pageerror", lambda error: traffic.page_errors.append(str(error)))
    return page


def take_graphiql(page: Page, url: str) -> bytes:
    """GraphiQL at `url`/graphql after running its example document, as PNG bytes."""
    _open(page, f"{url}/graphql")
    _wait(page, "GraphiQL to parse its example document", PARSED, QUERY_EDITOR, LOAD_TIMEOUT_S)
    page.locator(".graphiql-execute-button").click()
    _wait(page, "GraphiQL's answer pane to show data", ANSWERED, RESPONSE, LOAD_TIMEOUT_S)
    answer = json.loads(
        page.evaluate("s => document.querySelector(s).CodeMirror.getValue()", RESPONSE)
    )
    if answer.get("errors"):
        raise ScreenshotError(f"GraphiQL's example answered with errors: {answer['errors']}")
    page.mouse.move(0, 0)  # no hover tooltip over the run button in the picture
    return page.screenshot()


def take_status(page: Page, url: str, history_s: float) -> bytes:
    """The whole /status page at `url` once its lag chart spans `history_s`, as PNG bytes."""
    _open(page, f"{url}/status")
    what = f"/status to fill its partition table and draw {history_s:.0f} s of lag"
    _wait(page, what, STATUS_READY, history_s, history_s + LOAD_TIMEOUT_S)
    return page.screenshot(full_page=True)


def _write(out: Path, name: str, png: bytes) -> None:
    path = out / name
    path.write_bytes(png)
    print(f"{path}: {len(png) // 1024} KiB")


def run(url: str, out: Path, history_s: float) -> None:
    """Take both screenshots from the gateway at `url` into `out`."""
    url = url.rstrip("/")
    check_gateway(url)
    out.mkdir(parents=True, exist_ok=True)
    traffic = Traffic()
    with browser(traffic) as context:
        page = _page(context, traffic)
        graphiql = take_graphiql(page, url)
        traffic.check("GraphiQL")
        _write(out, "graphiql.png", graphiql)
        status = take_status(page, url, history_s)
        traffic.check("/status")
        _write(out, "status.png", status)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tooling.screenshots",
        description="Screenshots of GraphiQL and /status from a running gateway (make demo).",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8100", help="the gateway (loopback)")
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="where PNGs go")
    parser.add_argument(
        "--history",
        type=float,
        default=90.0,
        help="seconds of lag samples the status page's chart shows (default 90)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: 0 when both screenshots were written, 1 with the reason otherwise."""
    arguments = _arguments(argv)
    try:
        run(arguments.url, arguments.out, arguments.history)
    except ScreenshotError as exc:
        print(f"screenshots: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
