"""`workspace/executeCommand` drtriton.removeKernel: Apply undone for a target whose kernels are in the file.

The target's generated block and its dispatch decorator go, in one undoable edit tied to the version of the text it
was computed from; every other line stays as it is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments

REMOVE_KERNEL = "drtriton.removeKernel"


def register(server: DrtritonLanguageServer) -> None:
    @server.command(REMOVE_KERNEL)
    async def remove_kernel_command(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        if target is None:
            return _refuse(ls, "drtriton.removeKernel takes one argument: {uri, target}")
        uri, name = target
        if ls.jobs.running_for(uri, name) is not None:
            return _refuse(ls, f"{name}: a job is running on it; wait for it to end, or cancel it first")
        found = await ls.analysis_of(uri)  # the analysis of exactly the current text: the edit is tied to it
        analyzed = found[1].target_named(name) if found is not None else None
        if analyzed is None or analyzed.applied is None:
            return _refuse(ls, f"{name} has no kernel written into the file; nothing was changed")
        from drtriton_lsp.server.apply_kernel import send_line_edits
        from drtriton_lsp.source.writeback import remove_kernel  # libcst: loaded on first use

        document = found[0]
        try:
            removed = await asyncio.to_thread(remove_kernel, document.source, name)  # libcst, off the event loop
        except DrtritonError as problem:
            return _refuse(ls, f"{name}: {problem.message} {problem.hint}")
        failure = await send_line_edits(ls, document, document.source, removed, f"remove the kernel of {name}")
        if failure:
            return _refuse(ls, f"{name}: {failure}")
        return {"removed": True}


def _refuse(ls: DrtritonLanguageServer, message: str) -> dict[str, Any]:
    ls.tell(message, types.MessageType.Warning)
    return {"removed": False, "message": message}
