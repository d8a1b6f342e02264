"""Reads: one job in one snapshot, lists and their filter, counts, failure groups, the
timeline, queue summaries and kind descriptors. Nothing here writes a job.
"""
