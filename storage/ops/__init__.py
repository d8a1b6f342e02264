"""Operator and external writes: admin actions, external callbacks, maintenance passes and
checks of outputs sent from outside against a kind's declaration.
"""
