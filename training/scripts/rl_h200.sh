#!/usr/bin/env bash
# DRPO against GRPO from the shipped model on one H200, at the same steps and time budget, with held-out pass@1 per
# level (and speed against eager / torch.compile) before and after. Each call fits the device's 600 s limit: run it
# again on the same warm machine and it goes on where it stopped (PHASE picks what a call does).
#
# PHASE is a stage or a comma-separated list of stages, run in order:
#   before      eval of the shipped model (the baseline both arms start from)
#   drpo, grpo  one time-limited chunk of `rl --objective drpo|grpo` (resumes from its checkpoint when run again)
#               (a step whose gradient was not finite is replayed by non_finite_probe.py into ARM-probe.txt)
#   eval-drpo, eval-grpo
#               eval of that arm's model; the shards of the arm RETURN_MODEL names are copied to $OUT as
#               ARM-*.safetensors (one arm's: both are over the 64 MiB a call returns)
#   table       the results table of before, after-drpo and after-grpo (all three evaluations must be in WORK/results)
#   after       eval-drpo,eval-grpo,table
#   all         before,drpo,grpo,after in one call (a session with little device time: size CHUNK_SECONDS and
#               EVAL_SECONDS so the whole fits the call's 600 s)
# $OUT/bundle.tar.gz is rewritten after each stage, so a call stopped at its limit still returns what was done.
# A chunk checks its own time limit only between steps: a step still running STALL_SECONDS after it began writes the
# trainer's thread stacks to the arm's log (stall_report_s), and the chunk is killed CHUNK_GRACE seconds after its
# limit, so one stalled step cannot hold the call; the stages after it still run.
#
# Upload: the repository (the shipped model is 37 MB), the wheels of trl, datasets, dill and multiprocess in
# training/wheels, and the run's programs captured here (`drtriton-train rl --config small --capture-only --out DIR`:
# synthesis needs OR-Tools, whose 29 MB wheel does not fit beside the model under the 64 MiB limit); PROGRAMS names
# that programs.jsonl. Back (at most 8 files of 16 MiB): RETURN_MODEL's safetensors shards and bundle.tar.gz
# (results, logs, samples, manifests).
#
# Settings (environment): PHASE, PROGRAMS, STEPS (optimiser steps per arm, default 40), CHUNK_SECONDS (per call,
# default 420), CHUNK_GRACE (default 120), STALL_SECONDS (default 150), RL_SETTINGS (more `--set FIELD=VALUE` for
# both arms, space-separated, e.g. "prompts_per_step=4"), EVAL_LEVELS, EVAL_PER_LEVEL, EVAL_SAMPLES, EVAL_SECONDS,
# EVAL_WORKERS (programs judged at once, default 8), EVAL_SET (heldout, the shipped held-out sets, or validation: the
# validation split of PROGRAMS, sized for the GPU by program_scale; default heldout), RETURN_MODEL (drpo, grpo or
# none; default drpo), WORK, OUT.
# The table compares the three models on the programs all three evaluations reached (a time limit can stop one
# earlier than another).
set -euo pipefail
cd "$(dirname "$0")/../.."

PHASE=${PHASE:?set PHASE to before, drpo, grpo, after or all}
PROGRAMS=${PROGRAMS:-}
STEPS=${STEPS:-40}
CHUNK_SECONDS=${CHUNK_SECONDS:-420}
CHUNK_GRACE=${CHUNK_GRACE:-120}
STALL_SECONDS=${STALL_SECONDS:-150}
read -r -a rl_settings <<<"${RL_SETTINGS:-}"
EVAL_LEVELS=${EVAL_LEVELS:-1,2,5,20}
EVAL_PER_LEVEL=${EVAL_PER_LEVEL:-10}
EVAL_SAMPLES=${EVAL_SAMPLES:-4}
EVAL_SECONDS=${EVAL_SECONDS:-250}
EVAL_WORKERS=${EVAL_WORKERS:-8}
EVAL_SET=${EVAL_SET:-heldout}
RETURN_MODEL=${RETURN_MODEL:-drpo}
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
    local programs=()
    case "$EVAL_SET" in
        heldout) ;;
        validation) programs=(--programs "${PROGRAMS:?EVAL_SET=validation evaluates the validation split of PROGRAMS}") ;;
        *) echo "EVAL_SET is heldout or validation; got $EVAL_SET" >&2; exit 1 ;;
    esac
    stamp "eval $2 ($EVAL_SET)"
    "${TRAIN[@]}" eval --model "$1" --levels "$EVAL_LEVELS" --per-level "$EVAL_PER_LEVEL" --samples "$EVAL_SAMPLES" \
        --device cuda --time-limit "$EVAL_SECONDS" --workers "$EVAL_WORKERS" "${programs[@]}" \
        --results "$WORK/results" --name "$2" 2>>"$WORK/eval.log"
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
    local sets=(--set "time_limit_s=$CHUNK_SECONDS" --set "stall_report_s=$STALL_SECONDS")
    for setting in "${rl_settings[@]}"; do sets+=(--set "$setting"); done
    stamp "rl --objective $1: a chunk of $CHUNK_SECONDS s towards $STEPS steps ${resume[*]} ${rl_settings[*]}"
    local status=0
    timeout -k 15 "$((CHUNK_SECONDS + CHUNK_GRACE))" \
        "${TRAIN[@]}" rl --config small --objective "$1" --steps "$STEPS" --out "$run" "${resume[@]}" "${sets[@]}" \
        >>"$WORK/$1.log" 2>&1 || status=$?
    grep -v "FutureWarning\|warnings.warn" "$WORK/$1.log" | tail -30
    case $status in
        0) ;;
        124 | 137) stamp "rl --objective $1: killed $CHUNK_GRACE s past its chunk's limit (a stalled step: see the stacks in $1.log)" ;;
        *) stamp "rl --objective $1 failed (exit $status): see $1.log" ;;
    esac
    probe_skipped_steps "$1"
}

probe_skipped_steps() {  # probe_skipped_steps OBJECTIVE: replay each step of that arm whose gradient was not finite
    local step_file
    for step_file in "$WORK/$1"/non_finite_step_*.pt; do
        [ -f "$step_file" ] || continue
        stamp "$1: replaying $(basename "$step_file") (non_finite_probe.py) into $1-probe.txt"
        timeout 120 "$PYTHON" training/scripts/non_finite_probe.py "$step_file" --model training/models \
            --temperature "$(rl_setting temperature 1.0)" >>"$WORK/$1-probe.txt" 2>&1 || true
        mv "$step_file" "$step_file.probed"
    done
}

rl_setting() {  # rl_setting FIELD DEFAULT: FIELD's value in RL_SETTINGS, else DEFAULT
    local setting value=$2
    for setting in "${rl_settings[@]}"; do
        if [ "${setting%%=*}" = "$1" ]; then value=${setting#*=}; fi
    done
    echo "$value"
}

pack() {  # pack: bundle.tar.gz of what exists so far (results, logs, samples, manifests), replaced whole
    local have=()
    for path in results eval.log drpo.log grpo.log drpo-probe.txt grpo-probe.txt drpo/model drpo/rl_log.jsonl drpo/samples.jsonl \
                grpo/model grpo/rl_log.jsonl grpo/samples.jsonl; do
        if [ -e "$WORK/$path" ]; then have+=("$path"); fi
    done
    if [ ${#have[@]} -gt 0 ]; then
        tar czf "$OUT/bundle.tar.gz.part" -C "$WORK" --exclude='*.safetensors' "${have[@]}"
        mv "$OUT/bundle.tar.gz.part" "$OUT/bundle.tar.gz"
    fi
}

evaluate_arm() {  # evaluate_arm OBJECTIVE: that arm's model evaluated as after-OBJECTIVE (its shards to $OUT if asked)
    local model="$WORK/$1/model"
    if [ ! -f "$model/drtriton_model.json" ]; then
        stamp "$1: no model to evaluate (its chunk has not finished: run PHASE=$1 again)"
        return
    fi
    stamp "$1: complete=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['complete'])" \
        "$model/drtriton_model.json")"
    evaluate "$model" "after-$1"
    if [ "$RETURN_MODEL" = "$1" ]; then
        for shard in "$model"/*.safetensors; do cp "$shard" "$OUT/$1-$(basename "$shard")"; done
    fi
}

results_table() {
    "$PYTHON" training/scripts/rl_table.py "$WORK/results" before after-drpo after-grpo \
        | tee "$WORK/results/rl-drpo-vs-grpo.md"
}

stages=$PHASE
case "$PHASE" in
    all) stages=before,drpo,grpo,eval-drpo,eval-grpo,table ;;
    after) stages=eval-drpo,eval-grpo,table ;;
esac
IFS=, read -r -a stage_list <<<"$stages"
for stage in "${stage_list[@]}"; do
    case "$stage" in
        before | drpo | grpo | eval-drpo | eval-grpo | table) ;;
        *) echo "PHASE is all, after, or stages among before, drpo, grpo, eval-drpo, eval-grpo, table; got $PHASE" >&2
           exit 1 ;;
    esac
done
trap pack EXIT  # a stage that fails still returns the logs of those before it
for stage in "${stage_list[@]}"; do
    case "$stage" in
        before) evaluate training/models before ;;
        drpo | grpo) chunk "$stage" ;;
        eval-drpo | eval-grpo) evaluate_arm "${stage#eval-}" ;;
        table) results_table ;;
    esac
    pack
done
ls -l "$OUT"
stamp "done"
