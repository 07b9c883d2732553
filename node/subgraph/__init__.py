"""The node's GraphQL subgraph: the strawberry fields of every view, built per view kind
(`kinds`), and the fast path for plain lookups."""
