"""The caller's side of a job: the pipeline, search, the verifier's caller, the report; never imports torch.

What executes user or generated code is in worker/, reached only through a runner (runners/), never imported here.
"""
