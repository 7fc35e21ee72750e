#!/bin/bash
# Interleaved A/B of the time to the first verified kernel: a checkout of another commit (BASE, e.g. made with
# `git worktree add /tmp/base 79bdf3f`) and this tree take turns, ROUNDS times, each running
# benchmarks/first_verified.py with one cold start and one start with workers ahead; prints one line per run.
# Usage: benchmarks/first_verified_ab.sh BASE [ROUNDS] [DEVICE]
# Environment: PYTHON (default: this tree's .venv), TARGETS (FILE:TARGET ...), AHEAD (seconds, default 15).
set -euo pipefail
base=$(cd "$1" && pwd)
rounds=${2:-3}
device=${3:-cpu}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
targets=${TARGETS:-examples/scaled_activation_chain.py:ScaledActivation examples/mlp_block.py:MLPBlock}
ahead=${AHEAD:-15}
for round in $(seq "$rounds"); do
  for tree in "$base" "$here"; do
    name=$([ "$tree" = "$base" ] && echo base || echo this)
    # shellcheck disable=SC2086
    (cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$python" benchmarks/first_verified.py $targets \
      --device "$device" --rounds 1 --ahead "$ahead" 2>&1 | grep --line-buffered -E " (ahead|cold):" \
      | sed "s/^/$name round $round: /")
  done
done
