"""Talking to the nodes: HTTP calls (transport, coalescing, hedging, their answers read back)
and the change feeds the cache and subscriptions are fed from."""
