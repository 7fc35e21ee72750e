"""User code <-> tasks: find targets, extract Tasks, assemble candidates, write back.

Pure text transformations on the original lines (Python's ast, see pyfile.py); nothing executes user code.
"""
