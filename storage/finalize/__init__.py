"""How an attempt ends: the pure rules that decide it and the lease-guarded writes that carry
it out (one attempt, the general path's statement, the compact flush).
"""
