"""The public schema: the strawberry fields of every view and of the cluster, built per view
kind (`kinds`), and the request context the resolvers read."""
