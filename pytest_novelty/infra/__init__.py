"""Infrastructure every layer may use: errors, redaction, storage, the cache, the HTTP client,
the registry of spec prefixes, progress, content identities and the bundled resources.

Nothing here imports a layer (suites, generation, scoring, metrics, pipeline, gate, report) or a
front end; see ``ARCHITECTURE.md`` for the map and the import rule.
"""
