"""The regression test written per applied kernel: where it goes, that it passes for right kernels and fails
for wrong ones (run in a subprocess before anything is written), and that a user's own file is never replaced."""

from pathlib import Path

import pytest
from source_stand_ins import launching_relu_program

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.source.extract import example_input_expressions
from drtriton_lsp.source.regression_test import (
    check_regression_test,
    regression_test,
    write_regression_test,
)
from drtriton_lsp.source.writeback import write_back

USER_FILE = """import torch


# drtriton: inputs = [torch.randn(8, 33)]
def rectified(x):
    return torch.relu(x)
"""
GUARDS = [
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, None]},
    {"kind": "sizes", "symbol": "s0", "dims": [["x", 0]], "low": 2, "high": None},
    {"kind": "sizes", "symbol": "s1", "dims": [["x", 1]], "low": 2, "high": None},
]


def test_the_test_goes_beside_the_file_or_into_its_tests_folder(tmp_path):
    user = tmp_path / "model.py"
    beside = regression_test(user, "RMSNorm", "module", ("get_inputs()", "[]"), GUARDS)
    (tmp_path / "tests").mkdir()
    in_tests = regression_test(user, "RMSNorm", "module", ("get_inputs()", "[]"), GUARDS)

    assert beside.path == tmp_path / "test_drtriton_rms_norm.py"
    assert in_tests.path == tmp_path / "tests" / "test_drtriton_rms_norm.py"
    assert "MODULE_FILE = Path(__file__).resolve().parent / '../model.py'" in in_tests.text
    assert in_tests.text.startswith('"""drtriton regression test for RMSNorm in model.py')


def test_example_inputs_come_from_the_pragma_or_get_inputs():
    with_functions = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n" \
        "def get_inputs():\n    return [torch.randn(2)]\n\ndef get_init_inputs():\n    return []\n"

    assert example_input_expressions(USER_FILE, "rectified") == ("[torch.randn(8, 33)]", "[]")
    assert example_input_expressions(with_functions, "Model") == ("get_inputs()", "get_init_inputs()")


def test_a_file_the_user_wrote_is_never_replaced(tmp_path):
    test = regression_test(tmp_path / "model.py", "rectified", "function", ("[]", "[]"), GUARDS)
    test.path.write_text("def test_mine():\n    pass\n")

    with pytest.raises(DrtritonError) as raised:
        write_regression_test(test)

    assert "was not written by drtriton" in raised.value.message
    assert test.path.read_text() == "def test_mine():\n    pass\n"
    test.path.unlink()
    write_regression_test(test)
    write_regression_test(test)  # its own earlier test is replaced
    assert test.path.read_text() == test.text


def written_user_file(tmp_path: Path, wrong: bool) -> tuple[Path, bytes]:
    user = tmp_path / "model.py"
    user.write_text(USER_FILE)
    return user, write_back(USER_FILE, "rectified", launching_relu_program("rectified", wrong), "p", GUARDS).encode()


@pytest.mark.slow
def test_right_kernels_pass_their_test_and_nothing_is_left_behind(tmp_path):
    user, written = written_user_file(tmp_path, wrong=False)
    test = regression_test(user, "rectified", "function", example_input_expressions(USER_FILE, "rectified"), GUARDS)

    check_regression_test(test, user, written)

    assert sorted(path.name for path in tmp_path.iterdir()) == ["model.py"]
    assert user.read_text() == USER_FILE


@pytest.mark.slow
def test_wrong_kernels_fail_their_test_with_its_output(tmp_path):
    user, written = written_user_file(tmp_path, wrong=True)
    test = regression_test(user, "rectified", "function", example_input_expressions(USER_FILE, "rectified"), GUARDS)

    with pytest.raises(DrtritonError) as raised:
        check_regression_test(test, user, written)

    assert raised.value.message == (
        "the regression test test_drtriton_rectified.py failed against the written file; nothing was written"
    )
    assert "test_the_example_inputs_run_the_kernels_and_match" in raised.value.hint
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model.py"]
