"""The node's surfaces: the ASGI app (GraphQL over HTTP, /health, /metrics, the change feed
socket) and the uvicorn server. The top room: it assembles every other one."""
