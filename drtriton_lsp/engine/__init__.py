"""The pipeline around generated kernels: capture, verify, benchmark, report.

Modules that execute user code (capture, the worker side of verify and bench) run only in workers.
"""
