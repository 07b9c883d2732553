"""The /status page in headless Chromium against a gateway that authenticates: without a
token it shows the refusal and no data; with an operator's token in its URL fragment it
shows the cluster and takes the token out of the address bar."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.security.test_auth import (
    P,
    SigningKey,
    gateway,
    jwks,
    jwt_config,
    keys,
    sign,
)
from tooling.screenshots import CHROMIUM, FLAGS

__all__ = ["keys"]  # the fixture, imported for this module's tests

TIMEOUT_MS = 15_000


@pytest.fixture
def chromium() -> Iterator[Browser]:
    if shutil.which("chromium") is None:
        pytest.fail("Debian's chromium is not installed: `make browser` installs it")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def client(
    tmp_path_factory: pytest.TempPathFactory, keys: dict[str, SigningKey]
) -> Iterator[httpx.Client]:
    path = tmp_path_factory.mktemp("keys") / "jwks.json"
    path.write_bytes(jwks(keys["rsa"]))
    with gateway(jwt_config(jwks=str(path))) as http:
        yield http


def test_the_page_shows_the_refusal_then_the_cluster_for_an_operators_token(
    client: httpx.Client, chromium: Browser, keys: dict[str, SigningKey]
) -> None:  # the gateway set up first, so it stops after the browser
    page = chromium.new_page()
    page.goto(f"{client.base_url}/status")
    page.wait_for_selector("#problem:not([hidden])", timeout=TIMEOUT_MS)
    assert page.locator("#problem").inner_text().startswith("401")
    assert page.locator("#nodes tbody tr").count() == 0
    reader = sign(keys["rsa"])  # admitted, but without the operator scope
    page.fill("#token", reader)
    page.click("#token-form button")
    page.wait_for_function(
        "() => document.querySelector('#problem').textContent.startsWith('403')",
        timeout=TIMEOUT_MS,
    )
    operator = sign(keys["rsa"], scope="statefed:operator")
    page.goto(f"{client.base_url}/status#token={operator}")  # only the fragment changes
    page.wait_for_function(
        f"() => document.querySelectorAll('#partitions tbody tr').length === {P}",
        timeout=TIMEOUT_MS,
    )
    assert page.locator("#problem").is_hidden()
    nodes = page.locator("#nodes tbody tr").all_inner_texts()
    assert [row.split("\t")[0] for row in nodes] == ["n0", "n1"]
    assert "token" not in page.url  # out of the address bar (and its history entry)
    fresh = chromium.new_page()  # a new tab opened on such a link
    fresh.goto(f"{client.base_url}/status#token={operator}")
    fresh.wait_for_function(
        f"() => document.querySelectorAll('#partitions tbody tr').length === {P}",
        timeout=TIMEOUT_MS,
    )
    assert "token" not in fresh.url
    fresh.close()
    page.close()
