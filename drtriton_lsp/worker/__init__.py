"""What runs inside a worker process, with torch: the method table (main.py), capture, the judge, timing, ceilings.

engine/ never imports it; callers reach it through a runner (above it only `drtriton worker` and bench/'s GPU lock do).
"""
