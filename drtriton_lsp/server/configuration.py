"""`initialize`, `initialized`, `workspace/didChangeConfiguration`, `shutdown`: settings in, jobs and workers out.

Settings come from initializationOptions, then `workspace/configuration` (section "drtriton"); editors show problems once.
"""

from __future__ import annotations

import asyncio

from lsprotocol import types

from drtriton_lsp.server.language_server import DrtritonLanguageServer
from drtriton_lsp.server.settings import SECTION, Settings, parse_settings


def apply_settings(ls: DrtritonLanguageServer, *sources: object) -> None:
    """Defaults, overridden by each source in turn; each rejected value is reported once per session."""
    settings = Settings()
    for raw in sources:
        settings, problems = parse_settings(settings, raw)
        for problem in problems:
            if problem not in ls.reported_setting_problems:
                ls.reported_setting_problems.add(problem)
                ls.tell(problem, types.MessageType.Warning)
    moved = (settings.remote, settings.remotePython) != (ls.settings.remote, ls.settings.remotePython)
    ls.settings = settings
    if not settings.warmWorker or moved:  # workers started ahead where jobs no longer run serve nothing
        ls.jobs.stop_warm_workers()


async def pull_configuration(ls: DrtritonLanguageServer) -> None:
    """Ask the editor for the "drtriton" section (when it supports `workspace/configuration`). An answer that
    arrives after settings were pushed (`workspace/didChangeConfiguration` with settings) is older than them,
    and is dropped."""
    if not ls.client_supports("workspace", "configuration"):
        return
    pushes_before = ls.settings_pushes
    try:
        answer = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
    except Exception as refusal:  # an editor without the section answers with an error: keep what we have
        ls.log(f"drtriton: workspace/configuration failed ({refusal}); keeping the current settings")
        return
    if ls.settings_pushes != pushes_before:
        ls.log("drtriton: settings were pushed while workspace/configuration was asked; keeping the pushed ones")
        return
    apply_settings(ls, _section_of(ls.initialization_options), answer[0] if answer else None)


def _section_of(options: object) -> object:
    """initializationOptions may hold the settings directly or under "drtriton"."""
    if isinstance(options, dict) and isinstance(options.get(SECTION), dict):
        return options[SECTION]
    return options


def register(server: DrtritonLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: DrtritonLanguageServer, params: types.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        ls.initialization_options = params.initialization_options
        apply_settings(ls, _section_of(params.initialization_options))
        ls.analyses.start_worker()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: DrtritonLanguageServer, params: types.InitializedParams) -> None:
        await pull_configuration(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def workspace_did_change_configuration(
        ls: DrtritonLanguageServer, params: types.DidChangeConfigurationParams
    ) -> None:
        pushed = params.settings.get(SECTION) if isinstance(params.settings, dict) else None
        if pushed is not None:
            ls.settings_pushes += 1
            apply_settings(ls, _section_of(ls.initialization_options), pushed)
        else:
            await pull_configuration(ls)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DrtritonLanguageServer, params: None) -> None:
        ls.jobs.cancel_all()
        ls.jobs.close()
        ls.analyses.close()
