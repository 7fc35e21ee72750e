"""The VS Code extension's contributed settings mirror the server's (drtriton_lsp/server/settings.py) exactly.

The extension sends every top-level `drtriton.<name>` setting to the server, so a drift either loses a setting
or draws an "unknown drtriton setting" warning; the Settings editor shows the server's own documentation.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from drtriton_lsp.server.settings import SECTION, Settings

PACKAGE_JSON = Path(__file__).resolve().parents[2] / "editor_clients" / "vscode" / "package.json"


def contributed_server_settings() -> dict[str, dict]:
    properties = json.loads(PACKAGE_JSON.read_text())["contributes"]["configuration"]["properties"]
    prefix = f"{SECTION}."
    return {key[len(prefix) :]: value for key, value in properties.items() if key.startswith(prefix) and "." not in key[len(prefix) :]}


def expected_property(definition: dataclasses.Field) -> dict:
    expected = {
        "type": {bool: "boolean", int: "integer", str: "string"}[type(definition.default)],
        "default": definition.default,
        "markdownDescription": definition.metadata["doc"],
    }
    if "choices" in definition.metadata:
        expected["enum"] = list(definition.metadata["choices"])
    if "minimum" in definition.metadata:
        expected["minimum"] = definition.metadata["minimum"]
    if "scope" in definition.metadata:
        expected["scope"] = definition.metadata["scope"]
    return expected


def test_every_server_setting_is_contributed_with_its_default_values_and_documentation():
    contributed = contributed_server_settings()
    assert {field.name: expected_property(field) for field in dataclasses.fields(Settings)} == contributed
