"""Write the docs' reference tables (settings, CLI options) from their own definitions, so the docs cannot go stale.

Fills each `<!-- generated: NAME -->` block of docs/*.md; `--check` only says which pages are out of date (exit 1).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's drtriton_lsp, when run as a script

from drtriton_lsp.cli import build_parser  # noqa: E402
from drtriton_lsp.server.main import argument_parser as language_server_parser  # noqa: E402
from drtriton_lsp.server.settings import SECTION, settings_documentation  # noqa: E402

DOCS = REPO / "docs"
PACKAGE_JSON = REPO / "editor_clients" / "vscode" / "package.json"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)
USAGE_WIDTH = 116  # argparse wraps usage lines at this width, whatever the terminal


def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command a user types, by name: `drtriton optimize`, `drtriton verify`, `drtriton bench`, `drtriton-lsp`."""
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    parsers = {f"drtriton {name}": parser for name, parser in commands.choices.items() if name != "worker"}
    parsers["drtriton-lsp"] = language_server_parser()
    return parsers


def documented_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a user passes (not positionals, not --help/--version)."""
    return [
        action for action in parser._actions
        if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction))
    ]


def option_table(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    rows = ["```text", parser.format_usage().strip(), "```", "", "| option | default | effect |", "|---|---|---|"]
    for action in documented_options(parser):
        name = " ".join(action.option_strings)
        if action.choices:
            name += " " + "\\|".join(str(choice) for choice in action.choices)
        elif action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        default = "" if action.default in (None, False, "") else f"`{action.default}`"
        rows.append(f"| `{name}` | {default} | {escaped(action.help or '')} |")
    return "\n".join(rows)


def escaped(text: str) -> str:
    """Help text as one table cell: pipes escaped, no line breaks."""
    return " ".join(text.split()).replace("|", "\\|")


def editor_settings_table() -> str:
    """The VS Code extension's own settings (those the server never reads), from its package.json."""
    properties = json.loads(PACKAGE_JSON.read_text())["contributes"]["configuration"]["properties"]
    rows = ["| setting | default | effect |", "|---|---|---|"]
    for name, entry in properties.items():
        if name.startswith(f"{SECTION}.server.") or name.startswith(f"{SECTION}.trace."):
            default = entry["default"] if entry["default"] != "" else '""'
            effect = escaped(entry.get("markdownDescription") or entry["description"])
            rows.append(f"| `{name}` | `{default}` | {effect} |")
    return "\n".join(rows)


def generated_blocks() -> dict[str, str]:
    blocks = {"server-settings": settings_documentation(), "vscode-settings": editor_settings_table()}
    for command, parser in cli_parsers().items():
        blocks["options-" + command.replace("drtriton ", "").replace(" ", "-")] = option_table(parser)
    return blocks


def regenerated(text: str, blocks: dict[str, str]) -> str:
    def fill(match: re.Match) -> str:
        if match["name"] not in blocks:
            raise SystemExit(f"generate_reference: no table is called {match['name']!r} (known: {', '.join(blocks)})")
        return f"{match.group(1)}{blocks[match['name']]}\n{match.group(4)}"

    return BLOCK.sub(fill, text)


def stale_pages() -> list[Path]:
    """The docs pages whose generated blocks differ from the definitions."""
    blocks = generated_blocks()
    return [page for page in sorted(DOCS.glob("*.md")) if regenerated(page.read_text(), blocks) != page.read_text()]


def blocks_in_pages() -> set[str]:
    return {match["name"] for page in DOCS.glob("*.md") for match in BLOCK.finditer(page.read_text())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page is out of date")
    arguments = parser.parse_args()
    stale = stale_pages()
    if arguments.check:
        for page in stale:
            print(f"{page.relative_to(REPO)} is out of date: run python docs/scripts/generate_reference.py")
        return 1 if stale else 0
    blocks = generated_blocks()
    for page in stale:
        page.write_text(regenerated(page.read_text(), blocks))
        print(f"wrote {page.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
