"""Record docs/images/neovim-flow.png: Neovim with drtriton's plugin generating a kernel for examples/mlp_block.py.

Runs the real `nvim` and `drtriton-lsp` in a pseudo-terminal; pyte reads the screen and Pillow draws it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import tempfile
import termios
import time
from pathlib import Path

import pyte
from PIL import Image, ImageDraw, ImageFont

# Needs Neovim 0.11+ and drtriton-lsp in --bin (the test extra installs both in .venv/bin), and pyte and Pillow in the
# interpreter that runs this script (the screenshots extra):
#     python -m pip install -c constraints/ci.txt -e ".[screenshots]"
#     python docs/scripts/capture_neovim.py --bin .venv/bin
# Without a GPU the kernel is verified under Triton's interpreter, and the lens says no speed was measured.
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "mlp_block.py"
TARGET_LINE = 16  # `class MLPBlock(nn.Module):` in the example
COLUMNS, ROWS = 176, 34
CODE_WIDTH = 100  # columns of the code window, wide enough for the target's whole lens
FONT_SIZE = 15
FONT_FOLDERS = ("/usr/share/fonts/truetype/dejavu", "/System/Library/Fonts/Supplemental")
# Neovim's default colour scheme (Normal: NvimLightGrey2 on NvimDarkGrey2) for cells left at the terminal's default.
DEFAULT_FOREGROUND, DEFAULT_BACKGROUND = "e0e2ea", "14161b"
# xterm's palette for the 16 named colours pyte reports (Neovim uses 24-bit colours, so these are rare).
NAMED_COLOURS = {
    "black": "000000", "red": "cd0000", "green": "00cd00", "brown": "cdcd00", "blue": "0000ee",
    "magenta": "cd00cd", "cyan": "00cdcd", "white": "e5e5e5", "brightblack": "7f7f7f", "brightred": "ff0000",
    "brightgreen": "00ff00", "brightbrown": "ffff00", "brightblue": "5c5cff", "brightmagenta": "ff00ff",
    "brightcyan": "00ffff", "brightwhite": "ffffff",
}
INIT_LUA = """
vim.opt.runtimepath:prepend({plugin})
vim.lsp.config('drtriton', {{ settings = {{ drtriton = {{ device = 'auto' }} }} }})
vim.lsp.enable('drtriton')
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{{v:lua.require'drtriton'.statusline()}} "
vim.o.number = true
vim.o.signcolumn = 'yes'
-- the legacy Markdown syntax paints every `_` inside a word as an error; the report is full of such names
vim.api.nvim_set_hl(0, 'markdownError', {{ link = 'Normal' }})
"""


class NeovimTerminal:
    """Neovim in a pseudo-terminal of COLUMNS x ROWS, its output fed to a pyte screen."""

    def __init__(self, command: list[str], folder: Path, environment: dict[str, str]):
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.terminal, child_side = pty.openpty()
        fcntl.ioctl(child_side, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        # pyte answers Neovim's device-attribute queries through this hook
        self.screen.write_process_input = lambda answer: os.write(self.terminal, answer.encode())
        self.process = subprocess.Popen(
            command, cwd=folder, env=environment, stdin=child_side, stdout=child_side, stderr=child_side,
            start_new_session=True,
        )
        os.close(child_side)

    def pump(self, seconds: float) -> None:
        """Feed the screen everything Neovim writes during `seconds`."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.terminal], [], [], left)
            if ready:
                try:
                    self.stream.feed(os.read(self.terminal, 65536))
                except OSError:  # Neovim exited
                    return

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait_for(self, fragment: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while fragment not in self.text():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {fragment!r} on the screen after {timeout_s:.0f} s:\n{self.text()}")
            self.pump(0.5)

    def type(self, keys: str) -> None:
        os.write(self.terminal, keys.encode())
        self.pump(0.5)

    def close(self) -> None:
        """Quit Neovim (its language server and workers end with it), or kill it when it has not quit in 10 s."""
        os.write(self.terminal, b"\x1b:qa!\r")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.terminal)


def colour(name: str, default: str) -> tuple[int, int, int]:
    value = default if name == "default" else NAMED_COLOURS.get(name, name)
    return tuple(int(value[index : index + 2], 16) for index in (0, 2, 4))


def monospace_font(bold: bool) -> ImageFont.FreeTypeFont:
    name = "DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf"
    for folder in FONT_FOLDERS:
        if (Path(folder) / name).exists():
            return ImageFont.truetype(str(Path(folder) / name), FONT_SIZE)
    raise SystemExit(f"capture_neovim: {name} not found in {', '.join(FONT_FOLDERS)}; install the DejaVu fonts")


def render(screen: pyte.Screen, path: Path) -> None:
    """Draw every cell with its colours; reverse video swaps them, and so does the cursor's cell."""
    regular, bold = monospace_font(False), monospace_font(True)
    _, glyph_top, _, glyph_bottom = regular.getbbox("M")
    cell_width, cell_height = round(regular.getlength("M")), round(FONT_SIZE * 1.25)
    text_offset = (cell_height - (glyph_bottom - glyph_top)) // 2 - glyph_top  # capital letters centred in the cell
    image = Image.new("RGB", (COLUMNS * cell_width, ROWS * cell_height), colour("default", DEFAULT_BACKGROUND))
    draw = ImageDraw.Draw(image)
    cursor = None if screen.cursor.hidden else (screen.cursor.y, screen.cursor.x)
    for row in range(ROWS):
        for column in range(COLUMNS):
            cell = screen.buffer[row][column]
            foreground = colour(cell.fg, DEFAULT_FOREGROUND)
            background = colour(cell.bg, DEFAULT_BACKGROUND)
            if cell.reverse != ((row, column) == cursor):
                foreground, background = background, foreground
            x, y = column * cell_width, row * cell_height
            draw.rectangle([x, y, x + cell_width - 1, y + cell_height - 1], fill=background)
            if cell.data.strip():
                draw.text((x, y + text_offset), cell.data, fill=foreground, font=bold if cell.bold else regular)
    image = image.quantize(colors=64, dither=Image.Dither.NONE)  # few colours: a small PNG
    image.save(path, optimize=True)


def capture(bin_folder: Path, output: Path, timeout_s: float) -> None:
    folder = Path(tempfile.mkdtemp(prefix="drtriton-capture-"))
    try:
        shutil.copy(EXAMPLE, folder / EXAMPLE.name)
        (folder / "init.lua").write_text(INIT_LUA.format(plugin=repr(str(REPO / "editor_clients" / "nvim"))))
        environment = {
            "PATH": f"{bin_folder.resolve()}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),  # this checkout's drtriton_lsp, whatever the venv has installed
            "HOME": str(folder),
            "XDG_CONFIG_HOME": str(folder / "config"),
            "XDG_DATA_HOME": str(folder / "data"),
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_CACHE_HOME": str(folder / "cache"),
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            "LANG": "C.UTF-8",
        }
        nvim = shutil.which("nvim", path=environment["PATH"])
        if nvim is None:
            raise SystemExit(f"capture_neovim: no nvim in {bin_folder}; install the test extra there")
        terminal = NeovimTerminal([nvim, "--clean", "-u", "init.lua", EXAMPLE.name], folder, environment)
        try:
            terminal.wait_for("Generate Triton kernel", 120)
            terminal.type(f":{TARGET_LINE}\r")
            terminal.type(":DrtritonGenerate\r")
            terminal.wait_for("Apply verified kernel", timeout_s)
            terminal.type(":DrtritonShowReport\r")
            terminal.wait_for("drtriton report", 60)
            terminal.type("\x17p")  # Ctrl-W p: back to the code, so its cursor line is the target's
            terminal.type(f":vertical resize {CODE_WIDTH}\r")
            terminal.type(f":{TARGET_LINE}\r")
            terminal.type(":echo\r")  # an empty command line under the status lines
            terminal.pump(2)
            render(terminal.screen, output)
        finally:
            terminal.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, default=REPO / ".venv" / "bin", help="folder holding nvim and drtriton-lsp")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "neovim-flow.png")
    parser.add_argument("--timeout", type=float, default=600, help="seconds the generate job may take (default 600)")
    arguments = parser.parse_args()
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    capture(arguments.bin, arguments.out, arguments.timeout)
    print(f"wrote {arguments.out} ({arguments.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
