#!/bin/bash
# The product's check on a GPU machine in one device call (each step time-boxed; the numbers go to $OUT): the GPU
# test suite, the examples at full size (benchmarks/results/examples-h200.md's run), the editor's Generate with a
# model, and `drtriton optimize` with the shipped model. Run from the repository root on the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   # pygls, lsprotocol, cattrs,
#   PYTHONPATH=/tmp/site OUT=$OUT benchmarks/h200_check.sh                          # libcst, pytest-asyncio, pytest-lsp
# Environment: OUT (required), PYTHON (default python3), DRTRITON_COMMIT (the commit the results name), and the
# seconds of each step: TESTS_S (300), EXAMPLES_S (240), GENERATE_S (90), OPTIMIZE_S (180).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the directory whose files come back}
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
started=$SECONDS
stamp() { echo "[$((SECONDS - started)) s] $*"; }
mkdir -p "$OUT"

stamp "GPU tests"
timeout "${TESTS_S:-300}" "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider -n 8 --timeout 120 \
  tests/engine tests/worker tests/test_written_file.py 2>&1 | grep -v "PytestBenchmarkWarning\|warner(" \
  | tee "$OUT/gpu-tests.txt" | tail -15
stamp "examples"
timeout "${EXAMPLES_S:-240}" "$PYTHON" benchmarks/run_examples.py --device cuda --out "$OUT" --name examples-h200 \
  2>&1 | grep -v Warning | tail -5
stamp "the editor's Generate with a model"
timeout "${GENERATE_S:-90}" "$PYTHON" -m pytest -q -p no:cacheprovider tests/server/test_model_generate.py 2>&1 | tail -3
stamp "optimize with the shipped model"
timeout "${OPTIMIZE_S:-180}" "$PYTHON" -m drtriton_lsp.cli optimize examples/mlp_block.py --model training/models \
  --model-kind script --samples 4 --turns 1 --device cuda --search --search-seconds 10 \
  --json "$OUT/optimize-model.json" 2>&1 | tail -25
stamp "done"
