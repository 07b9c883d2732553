"""Reads: the planner that groups keys per owning node, fans out and merges, the cache that
answers plain lookups, and the protocol the API reads through."""
