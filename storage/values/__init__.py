"""Values without I/O: models, errors, the JSON codec and output rules, JSON Schema checks,
payloads, results, events, names, redaction and health.
"""
