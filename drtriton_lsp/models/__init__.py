"""Models as candidate sources: the prompt and output formats a trained model reads and writes.

`formats` is shared with the training package (training imports it, never the reverse); it imports no torch.
"""
