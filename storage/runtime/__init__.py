"""The worker runtime: the claim loop, the executor that runs one attempt, the completion
batcher, supervision of background loops, sizing, notices and the job a handler receives.
"""
