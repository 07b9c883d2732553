"""Live answers to subscriptions: top-N kept up to date and per-key updates, fed by the
nodes' change feeds (`gateway.nodes.hub`), each resumable by a token."""
