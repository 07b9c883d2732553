"""The `/status` page: a plain HTML page whose script (`static/status.js`) polls
`/status.json` every 1.5 s and draws what needs attention, the nodes, the partition map,
the lag of each partition over the last 5 minutes (kept in the page), pipeline progress and
dead letters; no CDN, no build step, no web font, light and dark by the browser's setting.

The page itself holds no data and is the same for everyone (as GraphiQL is); the data,
`/status.json`, needs the operator scope when authentication is on. A browser cannot send
an `Authorization` header on navigation, so the page takes the bearer token from its URL
fragment (`/status#token=<JWT>`, never sent to the server, removed from the address bar at
once) or from its token field, keeps it in the tab's sessionStorage and sends it with every
poll. Its Content-Security-Policy allows only the gateway's own scripts, styles and fetches.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources

from gateway.edge.graphiql import STATIC_PREFIX

__all__ = [
    "STATUS_JSON_PATH",
    "STATUS_PAGE_HEADERS",
    "STATUS_PAGE_POLICY",
    "STATUS_PATH",
    "status_page",
]

STATUS_PATH = "/status"
STATUS_JSON_PATH = "/status.json"

# its Content-Security-Policy: no inline script or style, no framing (clickjacking)
STATUS_PAGE_POLICY = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    b"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# besides the policy, X-Frame-Options and nosniff, which every page gets (send_page)
STATUS_PAGE_HEADERS = ((b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store"))


@functools.cache
def status_page() -> bytes:
    """The HTML of `/status`; its data comes from `STATUS_JSON_PATH`."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>statefed status</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{_asset("status.css")}">
</head>
<body data-source="{STATUS_JSON_PATH}">
<header class="top">
<div><h1>statefed status</h1><p id="updated" class="muted">connecting…</p></div>
<form id="token-form">
<label for="token">Bearer token</label>
<input id="token" type="password" autocomplete="off" placeholder="operator scope">
<button type="submit">Use</button>
</form>
</header>
<main>
<p id="problem" class="banner" role="alert" hidden></p>
<section id="summary" class="panel" aria-live="polite">
<h2 id="verdict" class="verdict">Waiting for the gateway…</h2>
<ul id="findings"></ul>
<div id="tiles" class="tiles"></div>
</section>
<section class="panel">
<h2>Lag per partition</h2>
<p class="muted">Records the ACTIVE copy that reads go to is behind its changelog, sampled
every 1.5 s while this page is open, over the last 5 minutes.</p>
<div class="chart">
<svg id="lag" role="img" aria-label="lag per partition over the last 5 minutes"></svg>
<p id="lag-empty" class="chart-empty" hidden></p>
</div>
<ul id="legend" class="legend"></ul>
</section>
<div class="columns">
<section class="panel"><h2>Nodes</h2><table id="nodes"><thead><tr><th>node</th>
<th>state</th><th>heartbeat</th><th>ACTIVE</th><th>STANDBY</th></tr></thead><tbody></tbody>
</table></section>
<section class="panel"><h2>Partition map</h2><table id="partitions"><thead><tr>
<th>partition</th><th>condition</th><th>ACTIVE</th><th>lag</th><th>STANDBY</th>
<th>restore</th></tr></thead><tbody></tbody></table></section>
</div>
<section class="panel"><h2>Pipeline</h2><table id="views"><thead><tr><th>view</th>
<th>kind</th><th>newest batch</th><th>reported</th><th class="num">input offsets</th>
<th class="num">changelog offsets</th><th class="num">late dropped</th></tr></thead>
<tbody></tbody></table></section>
<section class="panel"><h2>Dead letters</h2><p id="dead-total"></p><table id="dead"><thead>
<tr><th>reason</th><th>topic</th><th>partition</th><th>offset</th></tr></thead><tbody></tbody>
</table></section>
</main>
<script src="{_asset("status.js")}"></script>
</body>
</html>
""".encode()


def _asset(name: str) -> str:
    """The URL of static asset `name` with a digest of its content: assets are cached for a
    day, and a page from a new release must not run with the script of the previous one."""
    content = importlib.resources.files("gateway.edge").joinpath("static", name).read_bytes()
    return f"{STATIC_PREFIX}{name}?v={hashlib.sha256(content).hexdigest()[:12]}"
