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
# What only VS Code reads: the Settings editor's text for each choice, and where a value may be set.
EDITOR_ONLY_KEYS = {"enumDescriptions", "scope"}


def contributed_settings() -> dict[str, dict]:
    return json.loads(PACKAGE_JSON.read_text())["contributes"]["configuration"]["properties"]


def contributed_server_settings() -> dict[str, dict]:
    prefix = f"{SECTION}."
    return {
        key[len(prefix) :]: value
        for key, value in contributed_settings().items()
        if key.startswith(prefix) and "." not in key[len(prefix) :]
    }


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
    return expected


def test_every_server_setting_is_contributed_with_its_default_values_and_documentation():
    contributed = {
        name: {key: value for key, value in entry.items() if key not in EDITOR_ONLY_KEYS}
        for name, entry in contributed_server_settings().items()
    }
    assert {field.name: expected_property(field) for field in dataclasses.fields(Settings)} == contributed


def test_server_settings_have_one_value_per_window():
    """The server asks `workspace/configuration` without a scopeUri: a per-folder value would be ignored."""
    assert {name: entry.get("scope") for name, entry in contributed_server_settings().items()} == {
        field.name: "window" for field in dataclasses.fields(Settings)
    }


def test_every_choice_of_every_setting_is_described():
    undescribed = {
        key: (entry["enum"], entry.get("enumDescriptions"))
        for key, entry in contributed_settings().items()
        if "enum" in entry and len(entry.get("enumDescriptions", [])) != len(entry["enum"])
    }
    assert undescribed == {}
