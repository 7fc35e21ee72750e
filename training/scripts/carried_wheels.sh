# Sourced by the H200 scripts: trl, datasets and ortools (CP-SAT, for synth) are not on the GPU machine, so
# `need_carried_wheels` installs the wheels carried in training/wheels when $PYTHON cannot import them.
# Needs $PYTHON and a `stamp` function (a timestamped log line) from the sourcing script.

need_carried_wheels() {
    if "$PYTHON" -c "import trl, datasets, ortools" 2>/dev/null; then
        return
    fi
    if ! compgen -G "training/wheels/*.whl" >/dev/null; then
        echo "trl, datasets or ortools are missing and training/wheels holds no wheels: carry them (pip download" \
             "trl==1.16.0 datasets==5.2.0 ortools==9.15.6755 --python-version 3.12 --only-binary=:all:" \
             "-d training/wheels, minus what is installed there)" >&2
        exit 1
    fi
    stamp "installing trl, datasets and ortools from training/wheels"
    "$PYTHON" -m pip install --quiet --no-index --find-links training/wheels trl datasets ortools
}
