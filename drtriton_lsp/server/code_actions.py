"""`textDocument/codeAction`: drtriton's actions on the target under the cursor or selection.

VS Code lists them in the light bulb / Ctrl+. menu, Neovim in `vim.lsp.buf.code_action()`. Listing never runs code:
Verify and Benchmark are offered from the stored result alone (a kernel to check; a verified one to time).
"""

from __future__ import annotations

from lsprotocol import types

from drtriton_lsp.server.analysis import AnalyzedTarget
from drtriton_lsp.source.extract import PRAGMA_PLACEHOLDER
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_arguments
from drtriton_lsp.server.remove_kernel import REMOVE_KERNEL
from drtriton_lsp.server.verify_and_benchmark import BENCHMARK, BENCHMARK_NEEDS_A_GPU, VERIFY

PRAGMA_PREFIX = "# drtriton:"


def pragma_stub_lines(analyzed: AnalyzedTarget) -> list[str]:
    """The `# drtriton: ...` lines the missing-inputs message suggests, or [] when it suggests none."""
    problem = analyzed.inputs.problem
    if problem is None:
        return []
    return [line.strip() for line in problem.hint.splitlines() if line.strip().startswith(PRAGMA_PREFIX)]


def register(server: DrtritonLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite],
        ),
    )
    async def text_document_code_action(
        ls: DrtritonLanguageServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        lines = range(params.range.start.line, params.range.end.line + 1)
        found = await ls.snapshot_of(uri)
        # The light bulb asks on every cursor move and gets the instant answer; when the user asks (Ctrl+.,
        # Neovim's code_action()) about a target edited since the analysis, the menu waits for the analysis.
        if (
            found is not None
            and params.context.trigger_kind == types.CodeActionTriggerKind.Invoked
            and any(analyzed.edited_since_analysis for analyzed in found[1].targets_touching(lines))
        ):
            await ls.analysis_of(uri)
            found = await ls.snapshot_of(uri)
        if found is None:
            return None
        document, analysis = found
        touched = analysis.targets_touching(lines)
        actions: list[types.CodeAction] = []
        for analyzed in touched:
            name = analyzed.target.name
            arguments = target_arguments(uri, name)
            running = ls.jobs.running_for(uri, name)
            result = ls.results.current(analysis, name)
            if running is not None:
                actions.append(
                    _command_action(f"drtriton: Cancel job {running.id} on {name}", "drtriton.cancel", [running.id])
                )
            elif analyzed.applied is not None:
                actions.append(_command_action(f"drtriton: Re-verify the applied kernel of {name}", VERIFY, arguments))
                if result is not None and not result.refusal_to("benchmark") and ls.settings.device != "cpu":
                    actions.append(_command_action(f"drtriton: Benchmark the applied kernel of {name}", BENCHMARK, arguments))
                actions.append(_command_action(f"drtriton: Remove kernel from {name}", REMOVE_KERNEL, arguments))
            else:
                actions.append(_command_action(f"drtriton: Generate Triton kernel for {name}", "drtriton.generate", arguments))
                for kind, command in (("verify", VERIFY), ("benchmark", BENCHMARK)):
                    if result is None or result.refusal_to(kind):
                        continue
                    action = _command_action(f"drtriton: {kind.capitalize()} kernel for {name}", command, arguments)
                    if kind == "benchmark" and ls.settings.device == "cpu":
                        # shown greyed out with its reason where the editor can, else left out
                        if not ls.client_supports("text_document", "code_action", "disabled_support"):
                            continue
                        action.disabled = types.CodeActionDisabled(reason=BENCHMARK_NEEDS_A_GPU)
                    actions.append(action)
            if result is not None and result.applicable and analyzed.applied is None:
                actions.append(_command_action(f"drtriton: Apply verified kernel to {name}", "drtriton.apply", arguments))
            if result is not None:
                actions.append(_command_action(f"drtriton: Show report for {name}", "drtriton.showReport", arguments))
            stubs = [] if analyzed.edited_since_analysis else pragma_stub_lines(analyzed)
            if stubs:
                actions.append(_pragma_quick_fix(ls, document, analyzed, stubs))
        return actions or None


def _pragma_quick_fix(ls: DrtritonLanguageServer, document, analyzed: AnalyzedTarget, stubs: list[str]) -> types.CodeAction:
    """Insert the pragma lines above the target. Values the file does not give stay placeholders: tab stops where
    the editor takes snippet edits, else `<name>`, which the analysis then names as still to fill in."""
    indent = " " * analyzed.target.span.start_column
    insert_at = types.Position(line=analyzed.target.span.start_line - 1, character=0)
    where = types.Range(insert_at, insert_at)
    text = "".join(f"{indent}{line}\n" for line in stubs)
    to_fill = PRAGMA_PLACEHOLDER.findall(text)
    title = f"drtriton: Add example-input pragma to {analyzed.target.name}"
    if to_fill:
        title += f" (then fill in {', '.join(to_fill)})"
    edit: types.TextEdit | types.SnippetTextEdit = types.TextEdit(where, text)
    if to_fill and ls.client_supports("workspace", "workspace_edit", "snippet_edit_support"):
        stops = iter(range(1, len(to_fill) + 1))
        escaped = text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")
        snippet = PRAGMA_PLACEHOLDER.sub(lambda match: f"${{{next(stops)}:{match.group(1)}}}", escaped)
        edit = types.SnippetTextEdit(range=where, snippet=types.StringValue(snippet))
    return types.CodeAction(
        title=title, kind=types.CodeActionKind.QuickFix, edit=ls.document_edit(document, [edit]), is_preferred=True
    )


def _command_action(title: str, command: str, arguments: list) -> types.CodeAction:
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.RefactorRewrite,
        command=types.Command(title=title, command=command, arguments=arguments),
    )
