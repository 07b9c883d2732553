"""A replicated Kafka cluster of its own: one broker killed under load (chaos tier)."""
