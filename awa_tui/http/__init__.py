"""``awa-tui serve``: the JSON HTTP API of ADR-048 (external completion with an output, job
detail with its output, lists without).

Small modules, one concern each: ``app`` builds the FastAPI application, ``auth`` checks the
bearer token and read-only mode, ``guard`` caps request bodies and logs requests without their
contents, ``errors`` maps engine errors to HTTP statuses in one place, ``bodies`` holds the
request and response shapes (and serializes rows), ``callbacks``, ``jobs`` and ``kinds`` are
the routes, ``serve`` is the command. The routes call only ``storage``'s public API.
"""
