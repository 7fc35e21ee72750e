"""Program generation: determinism, canonical hashing, dedupe, held-out split, caps, the CLI.

These run the generator only (no torch.export), so they are quick.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from drtriton_training.cli import main
from drtriton_training.csp_dag import ComputeOp, CreateOp, CspDag, Program, ProgramSynthesizer
from drtriton_training.dataset import generate_heldout, synthesize_level, synthesize_training
from drtriton_training.emit import render_program
from drtriton_training.programs import HELDOUT_COUNT, HELDOUT_LEVELS, HELDOUT_SEED, heldout_hashes, load_heldout
from drtriton_training.shapes import SynthesisLimits


def test_same_seed_gives_the_same_program():
    first, second = ProgramSynthesizer(), ProgramSynthesizer()
    for level in (1, 5, 20):
        one, two = first.synthesize(level, 11), second.synthesize(level, 11)
        assert render_program(one, first.registry) == render_program(two, second.registry)
        assert one.canonical_hash() == two.canonical_hash()
    assert first.synthesize(5, 11).canonical_hash() != first.synthesize(5, 12).canonical_hash()


def test_level_is_the_number_of_compute_ops():
    program = ProgramSynthesizer().synthesize(7, 5)
    assert len(program.compute_steps) == 7


def test_canonical_hash_ignores_generation_order():
    relu = ComputeOp("relu", {}, (0,))
    steps_a = [CreateOp(2), relu, CreateOp(1), ComputeOp("exp", {}, (2,)), ComputeOp("add", {}, (1, 3))]
    steps_b = [CreateOp(1), ComputeOp("exp", {}, (0,)), CreateOp(2), ComputeOp("relu", {}, (2,)),
               ComputeOp("add", {}, (3, 1))]
    shapes_a = [(4, 8), (4, 8), (8,), (8,), (4, 8)]
    shapes_b = [(8,), (8,), (4, 8), (4, 8), (4, 8)]
    a = Program(CspDag(steps_a), shapes_a, {}, {}, 3, 0, 0, 0)
    b = Program(CspDag(steps_b), shapes_b, {}, {}, 3, 0, 0, 0)
    assert a.canonical_hash() == b.canonical_hash()
    swapped_args = Program(CspDag(steps_a[:4] + [ComputeOp("add", {}, (3, 1))]), shapes_a, {}, {}, 3, 0, 0, 0)
    assert swapped_args.canonical_hash() != a.canonical_hash()


def test_caps_bound_every_tensor_and_the_flops():
    limits = SynthesisLimits(max_tensor_elements=1 << 10, max_total_elements=1 << 14, max_flops=1 << 16)
    synthesizer = ProgramSynthesizer(limits=limits)
    for seed in range(10):
        program = synthesizer.synthesize(5, seed)
        assert program.flops <= limits.max_flops
        for shape in program.shapes:
            size = 1
            for dim in shape:
                assert 1 <= dim <= 1 << 15
                size *= dim
            assert size <= limits.max_tensor_elements


def test_levels_are_deduplicated_and_worker_count_does_not_change_the_result():
    serial = synthesize_level(1, 40, 5)
    parallel = synthesize_level(1, 40, 5, workers=2)
    hashes = [program.hash for program in serial]
    assert len(set(hashes)) == 40
    assert hashes == [program.hash for program in parallel]
    excluded = synthesize_level(1, 40, 5, exclude=hashes[:10])
    assert not set(hashes[:10]) & {program.hash for program in excluded}


def test_heldout_sets_are_shipped_and_regenerate_from_their_seed():
    for level in HELDOUT_LEVELS:
        programs = load_heldout(level)
        assert len(programs) == HELDOUT_COUNT
        assert len({program.hash for program in programs}) == HELDOUT_COUNT
        assert all(program.metadata["level"] == level for program in programs)
    shipped = [(program.hash, program.source) for program in load_heldout(2)]
    assert [(program.hash, program.source) for program in generate_heldout(2)] == shipped


def test_training_data_is_disjoint_from_the_heldout_sets():
    # The held-out seed itself would reproduce the held-out programs: all must be skipped.
    colliding = synthesize_level(1, 30, HELDOUT_SEED, exclude=heldout_hashes())
    assert not {program.hash for program in colliding} & heldout_hashes()
    training = synthesize_training([1, 2], 30, 1)
    assert not {program.hash for program in training} & heldout_hashes()
    with pytest.raises(ValueError, match="reserved"):
        synthesize_training([1], 1, HELDOUT_SEED)


def test_cli_writes_programs_and_an_index(tmp_path, capsys):
    assert main(["synth", "--levels", "1,2", "--count", "3", "--seed", "4", "--out", str(tmp_path), "--workers", "1"]) == 0
    records = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert [record["level"] for record in records] == [1, 1, 1, 2, 2, 2]
    for record in records:
        source = (tmp_path / record["path"]).read_text()
        assert "class Model(nn.Module)" in source and "def get_inputs()" in source
        assert {"hash", "ops", "flops", "bytes", "seed", "input_shapes"} <= set(record)
    assert "wrote 6 programs" in capsys.readouterr().out


def test_cli_rejects_bad_levels(tmp_path):
    with pytest.raises(SystemExit):
        main(["synth", "--levels", "one", "--count", "1", "--out", str(tmp_path)])


def test_each_retry_draws_more_fresh_inputs_and_only_the_last_draws_all_fresh(monkeypatch):
    # an op whose inputs make the constraints infeasible keeps its place: it is placed again with a larger share of
    # fresh inputs each time, gradually (the first retries may still reuse tensors), and the last draws only fresh ones
    from drtriton_training import csp_dag
    from drtriton_training.shapes import ShapeModel

    shares: list[float] = []
    extend, solve = ProgramSynthesizer._extend, ShapeModel.solve

    def recording(self, dag, ranks, name, rng, fresh):
        shares.append(fresh)
        return extend(self, dag, ranks, name, rng, fresh)

    def infeasible_until_the_last_attempt(self, seed):
        return solve(self, seed) if len(shares) == csp_dag.MAX_ATTEMPTS else None

    monkeypatch.setattr(ProgramSynthesizer, "_extend", recording)
    monkeypatch.setattr(ShapeModel, "solve", infeasible_until_the_last_attempt)
    ProgramSynthesizer().synthesize(1, seed=3)
    assert len(shares) == csp_dag.MAX_ATTEMPTS and shares[-1] == 1.0
    capped = [min(share, 1.0) for share in shares]
    assert all(earlier <= later for earlier, later in zip(capped, capped[1:]))
    assert shares[0] < 0.5 and all(earlier < later < 1.0 for earlier, later in zip(shares[:4], shares[1:5]))


def test_everything_but_synthesis_runs_without_or_tools(tmp_path):
    """The GPU machine has no OR-Tools and no room to carry it beside the model: eval, compare, teach, sft and rl (from
    captured programs) must import without it, and synth must say what is missing."""
    script = (
        "import sys\n"
        "sys.modules['ortools'] = None\n"  # makes `import ortools...` raise ImportError
        "import drtriton_training.cli, drtriton_training.evaluate, drtriton_training.compare\n"
        "import drtriton_training.teach, drtriton_training.rl\n"
        "from drtriton_training.programs import load_heldout\n"
        "assert len(load_heldout(1)) == 100\n"
        "try:\n"
        "    drtriton_training.cli.main(['synth', '--count', '1', '--out', sys.argv[1]])\n"
        "except ImportError as error:\n"
        "    print('synth needs', error.name)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "synth needs ortools" in ran.stdout


def test_gpu_scaled_caps_give_larger_programs_within_the_scaled_bounds():
    base = SynthesisLimits()
    scaled = base.scaled(256)
    assert (scaled.max_tensor_elements, scaled.max_total_elements, scaled.max_flops) == (
        256 * base.max_tensor_elements, 256 * base.max_total_elements, 256 * base.max_flops
    )
    programs = [ProgramSynthesizer(limits=scaled).synthesize(2, seed) for seed in range(6)]
    sizes = [math.prod(shape) for program in programs for shape in program.shapes]
    assert max(sizes) <= scaled.max_tensor_elements
    # most tensors are larger than the CPU caps allow any tensor to be
    assert sum(size > base.max_tensor_elements for size in sizes) > len(sizes) / 2, sizes
    assert all(program.flops <= scaled.max_flops for program in programs)
