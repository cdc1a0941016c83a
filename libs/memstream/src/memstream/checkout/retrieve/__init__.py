"""Phase 1 of checkout: a wide candidate pool from every lane, fused by RRF
(``lanes.Retriever``).

The package itself imports nothing: a client that needs only the levers
(``retrieve.config``) must not load the lanes' numerical libraries with them.
"""
