"""drtriton's training package: synthetic training data (CSP-DAG synthesis) and, later, training.

Part 1 (this release): the operator registry, the CP-SAT program generator and datasets.
"""
