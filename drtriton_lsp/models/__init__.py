"""Models as candidate sources beside the compiler: prompt and answer formats, backends, sources, settings.

`formats` is shared with the training package (training imports it, never the reverse); nothing here imports torch.
"""
