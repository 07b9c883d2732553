"""One GraphQL operation from its text to its answer: persisted documents, query limits, the
fast path for plain lookups, execution by strawberry, the answer's errors and extensions,
the printed SDL and possibleTypes."""
