#!/usr/bin/env bash
# Train the shipped script-writer model in one call on the H200 (or prove the path with CONFIG=tiny DEVICE=cpu):
# synth -> teach (parallel shards) -> sft (time-limited chunk) -> eval (held-out subset) -> model and results to $OUT.
#
# Every step resumes: run the same command again on the same (warm) machine and teach skips programs already
# taught, sft continues from its checkpoint, eval starts over (it is cheap). Work stays in $WORK between calls.
# Files sent back (at most 8, each under 16 MiB): the safetensors shards, and bundle.tar.gz with the config,
# tokenizer, manifest, results and teach ledgers. Unpack with: tar xzf bundle.tar.gz (see training/models/README.md).
#
# Settings (environment): CONFIG small|tiny, DEVICE cuda|cpu, LEVELS, COUNT (programs per level), SEED, SHARDS,
# VERIFY yes|no, TEACH_SECONDS, SFT_SECONDS, EVAL_LEVELS, EVAL_PER_LEVEL, EVAL_SAMPLES, EVAL_SECONDS, WORK, OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."

CONFIG=${CONFIG:-small}
DEVICE=${DEVICE:-cuda}
LEVELS=${LEVELS:-1,2,3,4,5}
COUNT=${COUNT:-400}
SEED=${SEED:-1}
SHARDS=${SHARDS:-$(nproc)}
VERIFY=${VERIFY:-yes}
TEACH_SECONDS=${TEACH_SECONDS:-150}
SFT_SECONDS=${SFT_SECONDS:-230}
EVAL_LEVELS=${EVAL_LEVELS:-1,2,5,20}
EVAL_PER_LEVEL=${EVAL_PER_LEVEL:-25}
EVAL_SAMPLES=${EVAL_SAMPLES:-4}
EVAL_SECONDS=${EVAL_SECONDS:-80}
WORK=${WORK:-/tmp/drtriton-train-$CONFIG}
OUT=${OUT:?set OUT to the directory whose files come back}
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD:$PWD/training${PYTHONPATH:+:$PYTHONPATH}"
TRAIN=("$PYTHON" -m drtriton_training.cli)
started=$SECONDS
stamp() { echo "[$((SECONDS - started)) s] $*"; }

# shellcheck source=training/scripts/carried_wheels.sh
source training/scripts/carried_wheels.sh
mkdir -p "$WORK" "$OUT"

if [ ! -f "$WORK/programs/index.jsonl" ]; then  # programs synthesised elsewhere can be put there (no OR-Tools needed)
    need_carried_wheels ortools
    stamp "synth: levels $LEVELS, $COUNT programs each"
    "${TRAIN[@]}" synth --levels "$LEVELS" --count "$COUNT" --seed "$SEED" --out "$WORK/programs" --workers "$(nproc)"
fi
need_carried_wheels trl datasets

verify_flag=--verify
statuses=verified
if [ "$VERIFY" = no ]; then
    verify_flag=--no-verify
    statuses=verified,unverified
fi
stamp "teach: $SHARDS shards on $DEVICE ($verify_flag), $TEACH_SECONDS s"
pids=()
for ((shard = 0; shard < SHARDS; shard++)); do
    "${TRAIN[@]}" teach --programs "$WORK/programs" --out "$WORK/teach" --shard "$shard/$SHARDS" --device "$DEVICE" \
        "$verify_flag" --time-limit "$TEACH_SECONDS" 2>>"$WORK/teach.log" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
cat "$WORK"/teach/programs-*.jsonl | "$PYTHON" -c "
import collections, json, sys
statuses = collections.Counter(json.loads(line)['status'] for line in sys.stdin if line.strip())
print('teach so far:', dict(statuses))"

stamp "sft --config $CONFIG, $SFT_SECONDS s this chunk"
"${TRAIN[@]}" sft --config "$CONFIG" --data "$WORK/teach" --out "$WORK/run" \
    --set "time_limit_s=$SFT_SECONDS" --set "statuses=$statuses" 2>&1 \
    | grep -v "FutureWarning\|warnings.warn" | tail -20

stamp "eval: levels $EVAL_LEVELS, $EVAL_PER_LEVEL each, k=$EVAL_SAMPLES, $EVAL_SECONDS s"
"${TRAIN[@]}" eval --model "$WORK/run/model" --levels "$EVAL_LEVELS" --per-level "$EVAL_PER_LEVEL" \
    --samples "$EVAL_SAMPLES" --device "$DEVICE" --baseline --time-limit "$EVAL_SECONDS" \
    --results "$WORK/results" --name "eval-$CONFIG-$DEVICE" 2>>"$WORK/eval.log"
cat "$WORK/results/eval-$CONFIG-$DEVICE.md"

stamp "packing $OUT"
cp "$WORK"/run/model/*.safetensors "$OUT"/
tar czf "$OUT/bundle.tar.gz" -C "$WORK" \
    --exclude='*.safetensors' run/model results teach teach.log eval.log
ls -l "$OUT"
"$PYTHON" - "$OUT" <<'EOF'
import pathlib, sys
files = [path for path in pathlib.Path(sys.argv[1]).iterdir() if path.is_file()]
largest = max(path.stat().st_size for path in files)
total = sum(path.stat().st_size for path in files)
problems = []
if len(files) > 8:
    problems.append(f"{len(files)} files (at most 8 come back)")
if largest >= 16 * 2**20:
    problems.append(f"a file of {largest / 2**20:.1f} MiB (at most 16 MiB each)")
if total >= 64 * 2**20:
    problems.append(f"{total / 2**20:.1f} MiB in all (at most 64 MiB)")
verdict = "OUT exceeds the transfer limits: " + "; ".join(problems) if problems else "OUT is within the transfer limits"
print(verdict)
sys.exit(1 if problems else 0)
EOF
stamp "done"
