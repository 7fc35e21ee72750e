"""Where jobs run: worker processes speaking JSON-RPC over stdio, started and watched by runners.

A crashing or hanging job costs its process, never the caller.
"""
