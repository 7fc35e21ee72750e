#!/usr/bin/env bash
# DRPO against GRPO from the shipped model on one H200, at the same steps and time budget, with held-out pass@1 per
# level (and speed against eager / torch.compile) before and after. Each call fits the device's 600 s limit: run it
# again on the same warm machine and it goes on where it stopped (PHASE picks what a call does).
#
#   PHASE=before  eval of the shipped model (the baseline both arms start from)
#   PHASE=drpo    one time-limited chunk of `rl --objective drpo` (resumes from its checkpoint when run again)
#   PHASE=grpo    the same for `rl --objective grpo`
#   PHASE=after   eval of both arms' models, then pack the results table and the better model into $OUT
#
# Upload: the repository (the shipped model is 37 MB), the wheels of trl, datasets, dill and multiprocess in
# training/wheels, and the run's programs captured here (`drtriton-train rl --config small --capture-only --out DIR`:
# synthesis needs OR-Tools, whose 29 MB wheel does not fit beside the model under the 64 MiB limit); PROGRAMS names
# that programs.jsonl. Back (at most 8 files of 16 MiB): the chosen arm's safetensors shards and bundle.tar.gz
# (results, logs, samples, manifests).
#
# Settings (environment): PHASE, PROGRAMS, STEPS (optimiser steps per arm, default 40), CHUNK_SECONDS (per call,
# default 420), EVAL_LEVELS, EVAL_PER_LEVEL, EVAL_SAMPLES, EVAL_SECONDS, WORK, OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."

PHASE=${PHASE:?set PHASE to before, drpo, grpo or after}
PROGRAMS=${PROGRAMS:-}
STEPS=${STEPS:-40}
CHUNK_SECONDS=${CHUNK_SECONDS:-420}
EVAL_LEVELS=${EVAL_LEVELS:-1,2,5,20}
EVAL_PER_LEVEL=${EVAL_PER_LEVEL:-10}
EVAL_SAMPLES=${EVAL_SAMPLES:-4}
EVAL_SECONDS=${EVAL_SECONDS:-250}
WORK=${WORK:-/tmp/drtriton-rl}
OUT=${OUT:?set OUT to the directory whose files come back}
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD:$PWD/training${PYTHONPATH:+:$PYTHONPATH}"
TRAIN=("$PYTHON" -m drtriton_training.cli)
started=$SECONDS
stamp() { echo "[$((SECONDS - started)) s] $*"; }

# shellcheck source=training/scripts/carried_wheels.sh
source training/scripts/carried_wheels.sh
need_carried_wheels trl datasets
mkdir -p "$WORK" "$OUT"

evaluate() {  # evaluate MODEL_DIR NAME: held-out pass@1 per level, the best of k timed against eager and compile
    "${TRAIN[@]}" eval --model "$1" --levels "$EVAL_LEVELS" --per-level "$EVAL_PER_LEVEL" --samples "$EVAL_SAMPLES" \
        --device cuda --time-limit "$EVAL_SECONDS" --results "$WORK/results" --name "$2" 2>>"$WORK/eval.log"
    cat "$WORK/results/$2.md"
}

chunk() {  # chunk OBJECTIVE: one time-limited chunk of that arm; the same steps and chunk budget for both arms
    local run="$WORK/$1" resume=()
    if [ -f "$run/run.json" ]; then resume=(--resume); fi
    if [ ! -f "$run/programs.jsonl" ]; then
        if [ -n "$PROGRAMS" ]; then
            mkdir -p "$run" && cp "$PROGRAMS" "$run/programs.jsonl"
        else
            need_carried_wheels ortools  # the run synthesises its programs
        fi
    fi
    stamp "rl --objective $1: a chunk of $CHUNK_SECONDS s towards $STEPS steps ${resume[*]}"
    "${TRAIN[@]}" rl --config small --objective "$1" --steps "$STEPS" --out "$run" "${resume[@]}" \
        --set "time_limit_s=$CHUNK_SECONDS" 2>&1 | grep -v "FutureWarning\|warnings.warn" | tail -30
}

case "$PHASE" in
    before) evaluate training/models before ;;
    drpo | grpo) chunk "$PHASE" ;;
    after)
        for objective in drpo grpo; do
            complete=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['complete'])" \
                "$WORK/$objective/model/drtriton_model.json")
            stamp "$objective: complete=$complete"
            evaluate "$WORK/$objective/model" "after-$objective"
        done
        "$PYTHON" - "$WORK" <<'EOF'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
rows = ["| model | level | programs | valid | pass@1 | pass@k | best of k vs eager | best of k vs compile | faster than compile |",
        "|---|---|---|---|---|---|---|---|---|"]
def cell(value):
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
for name in ("before", "after-drpo", "after-grpo"):
    results = json.loads((work / "results" / f"{name}.json").read_text())
    k = results["options"]["samples"]
    for level, summary in results["by_level"].items():
        rows.append(f"| {name} | {level} | {summary['programs']} | {cell(summary['valid_share'])} | "
                    f"{cell(summary['pass@1'])} | {cell(summary[f'pass@{k}'])} | "
                    f"{cell(summary.get('best_of_k_geomean_vs_eager'))} | "
                    f"{cell(summary.get('best_of_k_geomean_vs_compile'))} | "
                    f"{cell(summary.get('share_faster_than_compile'))} |")
(work / "results" / "rl-drpo-vs-grpo.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
        stamp "packing $OUT (DRPO's model; GRPO's stays in $WORK/grpo/model)"
        cp "$WORK"/drpo/model/*.safetensors "$OUT"/
        tar czf "$OUT/bundle.tar.gz" -C "$WORK" --exclude='*.safetensors' results eval.log \
            drpo/model drpo/rl_log.jsonl drpo/samples.jsonl grpo/model grpo/rl_log.jsonl grpo/samples.jsonl
        ls -l "$OUT"
        ;;
    *) echo "PHASE is before, drpo, grpo or after; got $PHASE" >&2; exit 1 ;;
esac
stamp "done"
