"""What the gateway knows of the cluster: the routing table from membership, the pipeline's
status per view, consistency and read tokens, the overview behind /status."""
