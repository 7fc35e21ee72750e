"""The embedded compiler: flat op graph -> Triton kernels plus a PyTorch hybrid forward.

Pure code generation over `graph.OpGraph`; imports neither engine nor source. Entry point:
`codegen.compile_graph`. On the way: `partition` (which ops fuse), `elementwise` (what each
fusible ATen op becomes in Triton), `schedule` (the plan as data and text), `kernel_source`
(kernel + launch wrapper), `forward_source` (the hybrid forward), `names` (collision-free names).
"""
