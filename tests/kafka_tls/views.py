"""The catalogue of the Kafka TLS cluster: word counts only, so its pipeline runs one
view's query (and the dead letters of one input topic)."""

from __future__ import annotations

from schema import WORD_COUNTS

CATALOGUE = (WORD_COUNTS,)
