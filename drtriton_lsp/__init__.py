"""drtriton: find PyTorch modules, generate verified Triton replacements, benchmark them.

The language server and the `drtriton` CLI share this package; see ARCHITECTURE in docs/.
"""

__version__ = "0.1.0"
