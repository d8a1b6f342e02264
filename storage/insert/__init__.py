"""Making jobs: enqueue through a lane, the COPY path of ``insert_many``, the per-call insert
plan, unique keys and periodic schedules.
"""
