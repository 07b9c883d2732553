"""Live answers: the feed hub that follows the nodes' change feeds, and the subscriptions
built on it (helper C's placeholder; the package's public surface is merged over this)."""
