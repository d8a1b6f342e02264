"""Plumbing: the pool and driver-error translation, the SQL more than one module runs, the
migrator, the output-column probe and metrics.
"""
