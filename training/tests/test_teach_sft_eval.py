"""teach, sft and eval: shards and splits, what reaches SFT data, refinement pairs from a search report, token
boundaries of the formats, recipes, the next job's worker started during a verification, and (slow) the three
commands end to end on the CPU.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.task import Task
from drtriton_training import cli
from drtriton_training.programs import heldout_hashes, load_heldout
from drtriton_training.evaluate import EvalOptions, evaluate, pass_at_k, to_markdown
from drtriton_training.sft import train_tokenizer
from drtriton_training.sft_configs import RECIPES, SftRecipe, recipe
from drtriton_training import teach
from drtriton_training.teach import Capture, Shard, load_examples, refinement_example, split_of, teacher_version

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PRODUCT_FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
HASHES = [hashlib.sha256(str(number).encode()).hexdigest()[:20] for number in range(300)]  # as programs hash


def level5_capture() -> Capture:
    """Held-out level-5 program 0 as teach captures it (graph from the product's fixture)."""
    graph = OpGraph.from_json(json.loads((PRODUCT_FIXTURES / "csp_dag_level5_graphs.json").read_text())[0])
    source = load_heldout(5)[0].source
    program = compile_graph(graph, prefix="model", forward_params=["x", "y"], has_self=True)
    return Capture(Task(name="Model", kind="module", source=source), graph, program, ["x", "y"])


@pytest.mark.parametrize(
    ("then", "prepared", "method"),
    [("capture", {}, "capture"), ("verify", {"TRITON_INTERPRET": "1"}, "verify"), (None, None, "benchmark")],
)
def test_a_verification_starts_the_worker_of_the_job_that_follows(monkeypatch, then, prepared, method):
    asked: dict = {}
    monkeypatch.setattr(teach, "verify_candidate", lambda *args, **options: asked.update(options))
    teach.verify_module(level5_capture(), "source", teach.TeachOptions(device="cpu"), runner=None, then=then)
    assert (asked["prepare_next"], asked["prepare_next_for"]) == (prepared, method)


def test_shards_split_the_programs_with_no_overlap_and_nothing_left_out():
    shards = [Shard.parse(f"{index}/4") for index in range(4)]
    for program_hash in HASHES:
        assert sum(shard.holds(program_hash) for shard in shards) == 1
    assert all(any(shard.holds(h) for h in HASHES) for shard in shards)


@pytest.mark.parametrize("text", ["4/4", "1", "a/b", "0/0", "-1/3"])
def test_a_bad_shard_is_refused_with_the_spelling_to_use(text):
    with pytest.raises(ValueError, match="INDEX"):
        Shard.parse(text)


def test_the_validation_split_is_a_stable_small_share_of_hashes():
    splits = [split_of(program_hash) for program_hash in HASHES]
    share = splits.count("validation") / len(splits)
    assert 0.02 < share < 0.09
    assert splits == [split_of(program_hash) for program_hash in HASHES]


def example(program_hash: str, kind: str = "script", status: str = "verified", **changes) -> dict:
    record = {
        "hash": program_hash, "kind": kind, "status": status, "split": split_of(program_hash),
        "teacher": teacher_version(), "prompt": f"p {program_hash}\n", "completion": "keep x\n### end\n",
    }
    return {**record, **changes}


def write_examples(directory: Path, records: list[dict]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "examples-000-of-001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory


def test_sft_data_is_verified_training_examples_once_each_and_never_a_held_out_program(tmp_path):
    train = [h for h in HASHES if split_of(h) == "train"]
    validation = next(h for h in HASHES if split_of(h) == "validation")
    held_out = sorted(heldout_hashes())[0]
    directory = write_examples(tmp_path / "teach", [
        example(train[0]),
        example(train[0], completion="kernel duplicate\n### end\n"),
        example(train[1], status="unverified"),
        example(train[2], status="rejected"),
        example(train[3], kind="kernel"),
        example(validation),
        example(held_out, split="train"),
    ])
    kept = load_examples([directory])
    assert [(e["hash"], e["completion"]) for e in kept] == [(train[0], "keep x\n### end\n")]
    asked = load_examples([directory], kinds=("script", "kernel"), statuses=("verified", "unverified"))
    assert [(e["hash"], e["kind"]) for e in asked] == [(train[0], "script"), (train[1], "script"), (train[3], "kernel")]
    assert [e["hash"] for e in load_examples([directory], split="validation")] == [validation]


def test_examples_in_another_format_version_are_refused_rather_than_mixed_in(tmp_path):
    h = next(h for h in HASHES if split_of(h) == "train")
    old = example(h, teacher={"drtriton": "0.0.1", "format": formats.FORMAT_VERSION + 1})
    with pytest.raises(DrtritonError, match="format"):
        load_examples([write_examples(tmp_path / "teach", [old])])


def test_a_search_report_that_kept_a_faster_schedule_gives_a_refinement_pair():
    report = json.loads((FIXTURES / "search_report_level5.json").read_text())
    capture = level5_capture()
    pair = refinement_example(capture, report, {"hash": "h", "level": 5})
    default_script = capture.program.schedule
    assert pair["kind"] == "refine" and pair["status"] == "verified"
    assert pair["times_ms"] == {"default": 0.0412, "searched": 0.0297}
    assert pair["prompt"] == formats.refine_prompt(capture.graph, default_script, measured_ms=0.0412)
    assert pair["completion"] == formats.script_completion(report["kernel"]["schedule"])
    assert formats.parse_script_answer(pair["completion"], capture.graph).valid


@pytest.mark.parametrize(
    "change",
    [{"kept": "default"}, {"searched_ms": 0.05}, {"searched_ms": None}],
    ids=["search-kept-default", "searched-slower", "searched-not-timed"],
)
def test_no_refinement_pair_when_the_search_did_not_find_a_faster_verified_schedule(change):
    report = json.loads((FIXTURES / "search_report_level5.json").read_text())
    report["search"].update(change)
    assert refinement_example(level5_capture(), report, {}) is None


def test_a_trained_tokenizer_ends_every_prompt_on_a_token_boundary_before_its_completion():
    capture = level5_capture()
    source = load_heldout(5)[0].source
    module = '"""ModelNew."""\n\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n'
    pairs = [
        (formats.script_prompt(capture.graph), formats.script_completion(capture.program.schedule)),
        (formats.refine_prompt(capture.graph, capture.program.schedule, measured_ms=1.5),
         formats.script_completion(capture.program.schedule)),
        (formats.kernel_prompt(source), formats.kernel_completion(module)),
    ]
    # trained on whole examples, so any merge across the prompt's end that the pre-tokenizer allowed would be learnt
    tokenizer = train_tokenizer([prompt + completion for prompt, completion in pairs] * 3, vocab_size=1000)
    for prompt, completion in pairs:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        whole_ids = tokenizer(prompt + completion, add_special_tokens=False)["input_ids"]
        assert whole_ids[: len(prompt_ids)] == prompt_ids
        assert tokenizer.decode(whole_ids[len(prompt_ids):]) == completion


def test_every_recipe_field_is_documented_and_overrides_parse_as_the_fields_type():
    documented = SftRecipe.__doc__
    for name in SftRecipe.__dataclass_fields__:
        assert name in ("name", "notes") or f"{name} (`" in documented or f"{name} (" in documented, name
    tiny = recipe("tiny", ["max_steps=7", "bf16=true", "kinds=script,kernel", "time_limit_s=2.5", "base_model=none"])
    assert (tiny.max_steps, tiny.bf16, tiny.kinds, tiny.time_limit_s, tiny.base_model) == (
        7, True, ("script", "kernel"), 2.5, None
    )
    with pytest.raises(ValueError, match="recipe field"):
        recipe("tiny", ["max_step=7"])
    with pytest.raises(ValueError, match="configs: tiny, small, 7b"):
        recipe("huge")


def test_the_small_recipe_fits_the_transfer_limits_of_the_gpu_machine():
    small = RECIPES["small"]
    per_layer = 4 * small.hidden_size**2 + 3 * small.hidden_size * small.intermediate_size
    parameters = small.num_layers * per_layer + 2 * small.vocab_size * small.hidden_size
    assert parameters <= 25_000_000
    assert parameters * 2 <= 60 * 2**20  # bfloat16 bytes, with room for the tokenizer and config
    assert small.save_dtype == "bfloat16" and small.max_shard_size == "15MB" and small.time_limit_s <= 480


def test_pass_at_k_is_the_unbiased_estimate():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - (3 / 5) * (2 / 4))


class ScriptedSampler:
    """Answers every prompt with the same completions: the oracle's script and a malformed one."""

    def __init__(self, completions: list[str]):
        self.completions = completions
        self.constraints: list = []

    def prompt_problem(self, prompt, answer):
        return ""  # every prompt fits: the room check has tests of its own (test_answer_room.py)

    def complete(self, prompt, samples, temperature, max_new_tokens, constraint=None):
        self.constraints.append(constraint)
        return self.completions[:samples]


@pytest.mark.slow
def test_eval_counts_a_verified_answer_an_invalid_one_and_pass_at_k(tmp_path):
    program = load_heldout(1)[0]
    from drtriton_lsp.runners.local import JobLimits, LocalRunner
    from drtriton_training.teach import capture_program

    with LocalRunner() as runner:
        script = capture_program(program.source, runner, JobLimits(timeout_s=180)).program.schedule
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    sampler = ScriptedSampler([formats.script_completion(script), "kernel nonsense\n### end\n"])
    stopped = evaluate(model_dir, EvalOptions(levels=(1,), per_level=1, samples=2, time_limit_s=0), sampler=sampler)
    assert stopped["partial"] and stopped["programs"] == []
    options = EvalOptions(levels=(1,), per_level=1, samples=2)
    results = evaluate(model_dir, options, log=lambda _line: None, sampler=sampler)
    [record] = results["programs"]
    assert (record["hash"], record["valid"], record["correct"]) == (program.hash, 1, 1)
    assert sum(record["invalid_reasons"].values()) == 1
    assert results["overall"]["valid_share"] == 0.5
    assert results["overall"]["pass@1"] == 0.5 and results["overall"]["pass@2"] == 1.0
    # the model is evaluated as the product serves it: script answers held to the grammar of the program's ops
    assert results["options"]["constrained"] and sampler.constraints[-1].line.startswith("(keep (")
    assert "held to the script grammar while sampled" in to_markdown(results)
    free = evaluate(model_dir, EvalOptions(levels=(1,), per_level=1, samples=2, constrained=False),
                    log=lambda _line: None, sampler=sampler)
    assert sampler.constraints[-1] is None and "sampled freely" in to_markdown(free)


@pytest.mark.slow
def test_teach_sft_and_eval_run_end_to_end_on_the_cpu(tmp_path, capsys):
    programs, taught, run = tmp_path / "programs", tmp_path / "teach", tmp_path / "run"
    synth = ["synth", "--levels", "1", "--count", "4", "--seed", "7", "--out", str(programs), "--workers", "1"]
    assert cli.main(synth) == 0
    assert cli.main(["teach", "--programs", str(programs), "--out", str(taught), "--limit", "2"]) == 0
    assert cli.main(["teach", "--programs", str(programs), "--out", str(taught), "--no-verify"]) == 0
    assert "skipped 2 already done" in capsys.readouterr().out
    ledger = [json.loads(line) for line in (taught / "programs-000-of-001.jsonl").read_text().splitlines()]
    assert len(ledger) == len({entry["hash"] for entry in ledger}) == 4
    # the second run did not verify (a program whose ops all stay in PyTorch has nothing to verify either way)
    assert {entry["status"] for entry in ledger[2:]} <= {"unverified", "no_candidate"}
    assert "unverified" in {entry["status"] for entry in ledger[2:]}
    records = [json.loads(line) for line in (taught / "examples-000-of-001.jsonl").read_text().splitlines()]
    for record in records:
        assert record["teacher"] == {"drtriton": record["teacher"]["drtriton"], "format": formats.FORMAT_VERSION}
        assert {"level", "hash", "dtype", "status", "verdict"} <= set(record)
        assert (record["verdict"] is None) == (record["status"] in ("unverified", "no_candidate"))
    verified = [record for record in records if record["status"] == "verified"]
    assert verified and all(record["verdict"]["verified"] for record in verified)

    admit = ["--set", "statuses=verified,unverified"]
    first = ["sft", "--config", "tiny", "--data", str(taught), "--out", str(run), *admit, "--set", "time_limit_s=0"]
    assert cli.main(first) == 0
    stopped = json.loads((run / "model" / "drtriton_model.json").read_text())
    assert stopped["stopped_by_time_limit"] and not stopped["complete"]
    assert cli.main(["sft", "--config", "tiny", "--data", str(taught), "--out", str(run), *admit]) == 0
    manifest = json.loads((run / "model" / "drtriton_model.json").read_text())
    assert manifest["complete"] and manifest["steps"] == RECIPES["tiny"].max_steps
    assert manifest["format"] == formats.FORMAT_VERSION and manifest["train_examples"] > 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["use_cache"] is True
    assert list((run / "model").glob("*.safetensors"))

    lora_run = tmp_path / "lora"
    lora = ["sft", "--config", "7b", "--base", str(run / "model"), "--data", str(taught), "--out", str(lora_run)]
    lora += admit
    lora += ["--set", "max_steps=2", "--set", "bf16=false", "--set", "use_cpu=true", "--set", "kinds=script"]
    lora += ["--set", "batch_size=2", "--set", "gradient_accumulation_steps=1", "--set", "max_length=1024"]
    assert cli.main(lora) == 0
    assert (lora_run / "model" / "adapter_config.json").is_file()

    results = tmp_path / "results"
    evaluation = ["eval", "--model", str(run / "model"), "--levels", "1", "--per-level", "2", "--samples", "2"]
    assert cli.main([*evaluation, "--results", str(results), "--name", "ci"]) == 0
    document = json.loads((results / "ci.json").read_text())
    assert document["overall"]["programs"] == 2 and document["model"]["steps"] == RECIPES["tiny"].max_steps
    assert document["model"]["checkpoint_hash"] and document["machine"]["device"] == "cpu"
    assert "| 1 | 2 |" in (results / "ci.md").read_text()
