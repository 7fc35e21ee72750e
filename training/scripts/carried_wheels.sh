# Sourced by the H200 scripts: trl and datasets (and ortools, CP-SAT, for synthesis) are not on the GPU machine, so
# `need_carried_wheels MODULE...` installs the wheels carried in training/wheels when $PYTHON cannot import a module.
# The shipped model leaves no room for ortools' 29 MB wheel under the 64 MiB transfer limit: scripts that start from
# it capture their programs here instead (`rl --capture-only`) and ask only for trl and datasets.
# Needs $PYTHON and a `stamp` function (a timestamped log line) from the sourcing script.

need_carried_wheels() {
    local modules=("$@") joined
    joined=$(IFS=,; echo "${modules[*]}")
    if "$PYTHON" -c "import $joined" 2>/dev/null; then
        return
    fi
    if ! compgen -G "training/wheels/*.whl" >/dev/null; then
        echo "${modules[*]} are not all installed and training/wheels holds no wheels: carry them (pip download" \
             "trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 ortools==9.15.6755 protobuf==6.33.6" \
             "--python-version 3.12 --only-binary=:all: --no-deps -d training/wheels, minus what is installed there)" >&2
        exit 1
    fi
    stamp "installing ${modules[*]} from training/wheels"
    "$PYTHON" -m pip install --quiet --no-index --find-links training/wheels "${modules[@]}"
}
