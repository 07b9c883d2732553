"""GraphiQL served from the package itself: these machines have no internet, so no CDN.

`static/` holds the unmodified UMD builds from npm (`npm pack graphiql@3.9.0 react@18.3.1
react-dom@18.3.1 graphql-ws@5.16.2`: `graphiql.min.js`, `graphiql.min.css`,
`umd/react.production.min.js`, `umd/react-dom.production.min.js`,
`umd/graphql-ws.min.js`) with their MIT LICENSE files. React 19 has no UMD build, nor has
graphql-ws 6.

Subscriptions run over the gateway's `graphql-transport-ws` WebSocket at the same path as
queries. The browser cannot set headers on a WebSocket, so the page sends the
`Authorization` header of GraphiQL's header editor in the connection's `connection_init`
payload.
"""

from __future__ import annotations

import html
import importlib.resources
import re

import orjson

__all__ = ["STATIC_PREFIX", "StaticAssets", "graphiql_page"]

STATIC_PREFIX = "/static/"

_SCRIPTS = (
    "react.production.min.js",
    "react-dom.production.min.js",
    "graphql-ws.min.js",
    "graphiql.min.js",
)
_STYLES = ("graphiql.min.css",)
_CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".LICENSE": "text/plain; charset=utf-8",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def graphiql_page(endpoint: str, default_query: str) -> bytes:
    """The GraphiQL HTML page, posting queries to `endpoint`; every asset is local."""
    styles = "".join(f'<link rel="stylesheet" href="{STATIC_PREFIX}{name}">' for name in _STYLES)
    scripts = "".join(f'<script src="{STATIC_PREFIX}{name}"></script>' for name in _SCRIPTS)
    # orjson output is valid JS; escaping "<" keeps a query from closing the script tag
    options = orjson.dumps({"url": endpoint, "query": default_query}).decode()
    options = options.replace("<", "\\u003c")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape("statefed GraphiQL")}</title>
{styles}
<style>body {{ margin: 0; height: 100vh; }} #graphiql {{ height: 100vh; }}</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
{scripts}
<script>
const options = {options};
const socketUrl = new URL(options.url, location.href);
socketUrl.protocol = socketUrl.protocol === "https:" ? "wss:" : "ws:";
let editorHeaders = {{}};  // the header editor's headers of the newest operation
function authorization() {{
  const value = editorHeaders.Authorization || editorHeaders.authorization;
  return value ? {{ Authorization: value }} : {{}};
}}
const wsClient = graphqlWs.createClient({{
  url: socketUrl.href, lazy: true, connectionParams: authorization,
}});
const base = GraphiQL.createFetcher({{ url: options.url, wsClient: wsClient }});
function fetcher(params, opts) {{
  editorHeaders = (opts && opts.headers) || {{}};
  return base(params, opts);
}}
ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(GraphiQL, {{ fetcher: fetcher, defaultQuery: options.query }})
);
</script>
</body>
</html>
""".encode()


class StaticAssets:
    """The files of `gateway/edge/static`, read on first use and kept (they never change)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[bytes, str]] = {}

    def get(self, name: str) -> tuple[bytes, str] | None:
        """(content, content type) of asset `name`, or None if there is no such asset."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        if not _NAME.match(name):
            return None
        content_type = next(
            (t for suffix, t in _CONTENT_TYPES.items() if name.endswith(suffix)), None
        )
        resource = importlib.resources.files("gateway.edge").joinpath("static", name)
        if content_type is None or not resource.is_file():
            return None
        self._cache[name] = (resource.read_bytes(), content_type)
        return self._cache[name]

    @staticmethod
    def referenced() -> tuple[str, ...]:
        """The assets the GraphiQL page loads."""
        return _STYLES + _SCRIPTS
