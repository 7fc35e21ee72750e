# Two entry points (README Quickstart): `make demo` and `make test`. Both set up .venv first.
# torch is installed before anything that depends on it, so pip never pulls a multi-GB CUDA
# build on a CPU machine; on a GPU machine, install your own torch first (TORCH_SPEC is skipped
# when the venv can already import torch).

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.drtriton-installed

.PHONY: demo test setup vscode-extension

setup: $(STAMP)

$(STAMP): pyproject.toml training/pyproject.toml constraints/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e ".[test]"
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e "training[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/drtriton optimize examples/mlp_block.py

# The VS Code extension: exact versions from its package-lock.json, unit tests against a stand-in for the
# `vscode` module, and editor_clients/vscode/drtriton.vsix. Needs node 20+ and npm.
vscode-extension:
	@command -v npm >/dev/null || { echo "make: the VS Code extension needs node 20+ and npm (editor_clients/vscode)"; exit 1; }
	cd editor_clients/vscode && npm ci --no-audit --no-fund --prefer-offline && npm test && npm run package

# pytest includes the Neovim end-to-end test (tests/editor_clients): the test extra installs Neovim 0.11.
test: $(STAMP) vscode-extension
	$(BIN)/python -m pytest
