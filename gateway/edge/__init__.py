"""The gateway's surfaces: the ASGI app and its HTTP routes (GraphQL over HTTP, SSE, WebSocket,
GraphiQL, /status, /health, /metrics) and the uvicorn server. The top room: it assembles
every other one."""
