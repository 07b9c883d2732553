"""From the changelog to the stores: the materializer that consumes it, the partitions this
node holds and their lease, the feed of applied changes."""
