"""Fixtures for the source-layer tests: a realistic user file and a stand-in compiled program.

The stand-in program lives in source_stand_ins.py so tests can also build their own.
"""

from pathlib import Path

import pytest
from source_stand_ins import StandInProgram, relu_program

DATA = Path(__file__).parent / "data"


@pytest.fixture
def realistic_source() -> str:
    return (DATA / "realistic_model.py").read_text()


@pytest.fixture
def mlp_program() -> StandInProgram:
    return relu_program("mlp_block")
