"""`drtriton bench`: a suite of KernelBench-form problems run through the pipeline, its results, report and charts.

Sits above engine/: each problem is one `optimize_target`, placed against the GPU's measured ceilings.
"""
