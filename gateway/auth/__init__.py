"""Who is asking: bearer tokens checked against keys (a JWKS or a shared secret)."""
