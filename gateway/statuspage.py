"""The `/status` page: a plain HTML page whose script (`static/status.js`) polls
`/status.json` every 1.5 s and draws nodes, the partition map, lag over the last minutes,
pipeline progress and dead letters; no CDN, no build step.

The page itself holds no data and is the same for everyone (as GraphiQL is); the data,
`/status.json`, needs the operator scope when authentication is on. A browser cannot send
an `Authorization` header on navigation, so the page takes the bearer token from its URL
fragment (`/status#token=<JWT>`, never sent to the server, removed from the address bar at
once) or from its token field, keeps it in the tab's sessionStorage and sends it with every
poll. Its Content-Security-Policy allows only the gateway's own scripts, styles and fetches.
"""

from __future__ import annotations

from gateway.graphiql import STATIC_PREFIX

__all__ = ["STATUS_JSON_PATH", "STATUS_PAGE_HEADERS", "STATUS_PATH", "status_page"]

STATUS_PATH = "/status"
STATUS_JSON_PATH = "/status.json"

# no inline script or style, no framing (clickjacking), no referrer, no sniffing
STATUS_PAGE_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        b"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


def status_page() -> bytes:
    """The HTML of `/status`; its data comes from `STATUS_JSON_PATH`."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>statefed status</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{STATIC_PREFIX}status.css">
</head>
<body data-source="{STATUS_JSON_PATH}">
<header>
<h1>statefed status</h1>
<span id="updated">connecting…</span>
<form id="token-form">
<label>Bearer token <input id="token" type="password" autocomplete="off"></label>
<button type="submit">Use</button>
</form>
</header>
<p id="problem" hidden></p>
<section><h2>Nodes</h2><table id="nodes"><thead><tr><th>node</th><th>state</th>
<th>alive</th><th>heartbeat age</th><th>active</th><th>standby</th></tr></thead>
<tbody></tbody></table></section>
<section><h2>Partition map</h2><p id="unassigned"></p><table id="partitions"><thead><tr>
<th>partition</th><th>ACTIVE</th><th>STANDBY</th><th>lag</th><th>restore</th></tr></thead>
<tbody></tbody></table></section>
<section><h2>Lag per partition (ACTIVE copy, last 5 minutes)</h2>
<svg id="lag" role="img" aria-label="lag per partition over time"></svg>
<div id="legend"></div></section>
<section><h2>Pipeline</h2><table id="views"><thead><tr><th>view</th><th>kind</th>
<th>batch</th><th>reported</th><th>input offsets</th><th>changelog offsets</th>
<th>late dropped</th></tr></thead><tbody></tbody></table></section>
<section><h2>Dead letters</h2><p id="dead-total"></p><table id="dead"><thead><tr>
<th>reason</th><th>topic</th><th>partition</th><th>offset</th></tr></thead><tbody></tbody>
</table></section>
<script src="{STATIC_PREFIX}status.js"></script>
</body>
</html>
""".encode()
