"""The compiler's error for a schedule it cannot follow, raised by the script parser, the planner and the templates.

It sits below all of them, so a template raises it without importing the script module that imports the templates.
"""

from __future__ import annotations

from drtriton_lsp.errors import DrtritonError


class ScheduleError(DrtritonError):
    """A schedule script that does not parse, or does not fit the graph; says which line and choice."""
