"""End-to-end fixtures: a pytest-lsp client driving the real `drtriton-lsp` over stdio, as VS Code and as Neovim.

Each test runs once per editor capability profile; LSP specification warnings fail the test.
Test modules mark themselves `pytestmark = pytest.mark.asyncio` (the project runs pytest-asyncio in strict mode).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_helpers import EDITORS, TEST_SETTINGS
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/server" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning"))


@pytest_lsp.fixture(
    params=EDITORS,
    config=ClientServerConfig(server_command=[sys.executable, "-m", "drtriton_lsp.server.main"]),
)
async def client(request, lsp_client: LanguageClient):
    lsp_client.applied_edits = []

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def workspace_apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        lsp_client.applied_edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    lsp_client.message_requests = []
    lsp_client.message_request_choice = None  # the action title a test clicks; None dismisses the message

    @lsp_client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def window_show_message_request(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        lsp_client.message_requests.append(params)
        return next((action for action in params.actions or [] if action.title == lsp_client.message_request_choice), None)

    lsp_client.code_lens_refreshes = 0

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def workspace_code_lens_refresh(params: None) -> None:
        lsp_client.code_lens_refreshes += 1

    # lsprotocol 2025.0.0 reads any code action that carries a `command` as a bare Command; editors do not.
    lsp_client.protocol._converter.register_structure_hook(
        types.Command | types.CodeAction, _command_or_code_action(lsp_client.protocol._converter)
    )
    lsp_client.editor = request.param
    lsp_client.initialize_result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=pytest_lsp.client_capabilities(request.param),
            initialization_options=TEST_SETTINGS,
        )
    )
    yield
    assert lsp_client.error is None, lsp_client.error
    await lsp_client.shutdown_session()


@pytest.fixture
def example_file(tmp_path):
    def copy(name: str = "scaled_activation_chain.py") -> Path:
        destination = tmp_path / name
        shutil.copy(EXAMPLES / name, destination)
        return destination

    return copy


def _command_or_code_action(converter):
    def structure(value, _type):
        kind = types.Command if isinstance(value.get("command"), str) else types.CodeAction
        return converter.structure(value, kind)

    return structure
