"""rl: DRPO's loss on hand-made tensors, GRPO's zero advantage for an all-equal group, the curriculum and its sampler,
the hacking monitor, the reward on real verifier calls (slow), and `drtriton-train rl --config tiny` end to end on
the CPU with a curriculum advance and a resume (slow).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.models import formats
from drtriton_training import cli
from drtriton_training.curriculum import Curriculum, CurriculumSampler
from drtriton_training.programs import load_heldout
from drtriton_training.drpo import correct_set_weights, drpo_loss
from drtriton_training.rewards import (
    CHEATING_REWARD, UNPARSED_REWARD, VERIFIED_REWARD, DecoupledReward, JudgePool, Judging, RejectionMonitor,
    RlProgram,
)
from drtriton_training.rl import StallReport, drop_non_finite_gradients
from drtriton_training.rl_configs import RECIPES, recipe
from drtriton_training.sft import build_model, train_tokenizer
from drtriton_training.sft_configs import RECIPES as SFT_RECIPES

REPOSITORY = Path(__file__).resolve().parents[2]

# two groups of four rollouts: group 0 has two correct (one faster), group 1 none
GROUP = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
CORRECT = torch.tensor([True, True, False, False, False, False, False, False])
SPEED = torch.tensor([0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_drpo_weights_sum_to_one_over_each_groups_correct_set_and_favour_the_faster_rollout():
    weights = correct_set_weights(CORRECT, SPEED, GROUP, lam=0.5)
    assert weights[:2].sum().item() == pytest.approx(1.0)
    assert weights[0] > weights[1] > 0
    assert weights[0].item() == pytest.approx(torch.softmax(torch.tensor([1.4, 0.0]), 0)[0].item())
    assert weights[2:].eq(0).all()
    on_the_cpu = correct_set_weights(CORRECT, torch.zeros(8), GROUP, lam=0.5)
    assert on_the_cpu[:2].tolist() == [0.5, 0.5]


def test_drpo_raises_the_log_probability_of_correct_rollouts_and_lowers_the_incorrect_ones():
    logps = torch.tensor([-3.0, -4.0, -2.0, -6.0, -1.0, -2.0, -3.0, -4.0], requires_grad=True)
    loss, parts = drpo_loss(logps, CORRECT, SPEED, GROUP, lam=1.0)
    loss.backward()
    # gradient descent moves against the gradient: negative raises a log-probability, positive lowers it
    assert (logps.grad[:2] < 0).all() and (logps.grad[2:] > 0).all()
    # the penalty weighs the likelier wrong answer more
    assert logps.grad[2] > logps.grad[3] and logps.grad[4] > logps.grad[7]
    assert parts["correct_share"] == 0.25


def test_a_group_with_no_correct_rollout_gives_only_the_log_sum_exp_penalty():
    logps = torch.tensor([-1.0, -2.0, -3.0, -4.0])
    loss, parts = drpo_loss(logps, torch.zeros(4, dtype=torch.bool), torch.zeros(4), torch.zeros(4, dtype=torch.long),
                            lam=1.0, normaliser=2.0)
    assert parts["positive"] == 0
    assert loss.item() == pytest.approx(torch.logsumexp(logps, 0).item() / 2.0)


def test_the_kl_term_adds_beta_times_the_groups_mean_kl():
    logps = torch.tensor([-1.0, -2.0])
    correct, speed, group = torch.tensor([True, False]), torch.zeros(2), torch.zeros(2, dtype=torch.long)
    without, _ = drpo_loss(logps, correct, speed, group, lam=1.0)
    with_kl, _ = drpo_loss(logps, correct, speed, group, lam=1.0, beta=0.5, sequence_kl=torch.tensor([0.2, 0.6]))
    assert (with_kl - without).item() == pytest.approx(0.5 * 0.4)


def tiny_policy():
    texts = ["### graph\nop a = relu(x)\n### script\nkernel pointwise a\n### end\n"] * 4
    tokenizer = train_tokenizer(texts, vocab_size=300)
    return build_model(SFT_RECIPES["tiny"], tokenizer), tokenizer


@pytest.mark.parametrize("objective", ["grpo", "drpo"])
def test_an_all_equal_reward_group_gives_grpo_zero_advantage_and_drpo_only_its_penalty(tmp_path, objective):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from drtriton_training.drpo import DrpoTrainer

    model, tokenizer = tiny_policy()

    def correctness(completions, **_):
        return [UNPARSED_REWARD] * len(completions)

    def speed(completions, **_):
        return [None] * len(completions)

    arguments = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, beta=0.0, per_device_train_batch_size=4, num_generations=4,
        steps_per_generation=1, max_completion_length=4, report_to=[], disable_tqdm=True,
    )
    trainer_class, options = (DrpoTrainer, {"drpo_lambda": 1.0}) if objective == "drpo" else (GRPOTrainer, {})
    trainer = trainer_class(model=model, reward_funcs=[correctness, speed], args=arguments,
                            train_dataset=Dataset.from_list([{"prompt": "### graph\n"}] * 4), processing_class=tokenizer, **options)
    batch = trainer._generate_and_score_completions([{"prompt": "### graph\n"}] * 4)
    assert batch["advantages"].eq(0).all()
    if objective == "drpo":
        assert not batch["drpo_correct"].any() and batch["drpo_group"].tolist() == [0, 0, 0, 0]
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        assert loss.item() < 0  # a log-sum-exp of log-probabilities; its gradient is not zero
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainer.model.parameters())


def test_the_curriculum_advances_at_the_threshold_and_the_sampler_follows_it():
    curriculum = Curriculum((1, 2, 5), threshold=0.5)
    assert not curriculum.record(0, 0.25, 0.5) and curriculum.level == 1
    assert not curriculum.record(1, None, 0.0) and curriculum.level == 1
    assert curriculum.record(2, 0.5, 1.0) and curriculum.level == 2
    assert curriculum.last_pass_at_1() is None and curriculum.history[-1]["advanced_to"] == 2
    sampler = CurriculumSampler({1: [0, 1, 2], 2: [3, 4], 5: [5]}, curriculum, mini_repeat_count=2, batch_size=2,
                                repeat_count=1, batches_per_epoch=3, seed=0)
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 12
    assert set(drawn) == {3, 4} and all(drawn[i] == drawn[i + 1] for i in range(0, 12, 2))
    curriculum.record(3, 0.9, 1.0)
    assert curriculum.level == 5 and set(sampler) == {5}
    assert not curriculum.record(4, 1.0, 1.0) and curriculum.level == 5  # the last level stays


def test_a_rising_share_of_one_rejection_kind_is_reported_and_a_steady_one_is_not():
    monitor = RejectionMonitor(window=2, rise=0.2)
    steady = [monitor.update(Counter(wrong_result=2), 8) for _ in range(4)]
    assert steady == [[], [], [], []]
    monitor.update(Counter(reference_in_pytorch=4), 8)
    [warning] = monitor.update(Counter(reference_in_pytorch=5), 8)
    assert "reference_in_pytorch rose from 0% to 56%" in warning


def test_the_recipes_check_their_fields_and_overrides():
    tiny = recipe("tiny", ["levels=1,2,5", "advance_threshold=0.0", "model=none"])
    assert (tiny.levels, tiny.advance_threshold, tiny.model) == ((1, 2, 5), 0.0, None)
    assert RECIPES["small"].rollouts_per_step % RECIPES["small"].num_generations == 0
    with pytest.raises(ValueError, match="levels must rise"):
        recipe("tiny", ["levels=2,1"])
    with pytest.raises(ValueError, match="recipe field"):
        recipe("tiny", ["level=2"])
    with pytest.raises(ValueError, match="configs: tiny, small, multi_gpu"):
        recipe("huge")


def test_a_step_that_outlasts_the_stall_limit_writes_where_every_thread_waits(tmp_path):
    def waiting_in_judging():
        time.sleep(0.6)

    report_path = tmp_path / "stacks.txt"
    with report_path.open("w") as stream:
        report = StallReport(0.2, stream)
        report.arm()
        waiting_in_judging()
        report.disarm()
        time.sleep(0.5)  # disarmed: no further report
    text = report_path.read_text()
    assert "waiting_in_judging" in text
    assert text.count("waiting_in_judging") <= 3  # one report each 0.2 s of the 0.6 s wait, none after


def test_a_step_whose_gradient_is_not_finite_leaves_every_weight_as_it_was():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    model(torch.ones(2, 3)).sum().backward()
    assert drop_non_finite_gradients(model) == []
    assert all(p.grad is not None for p in model.parameters())
    model[1].bias.grad[0] = float("nan")
    assert drop_non_finite_gradients(model) == ["1.bias"]
    assert all(p.grad is None for p in model.parameters())
    before = [p.detach().clone() for p in model.parameters()]
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    torch.optim.AdamW(model.parameters(), lr=0.1).step()
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_a_step_whose_rollouts_repeat_one_answer_says_so_and_warns(tmp_path):
    from drtriton_training.rewards import DecoupledReward, Judging, RlProgram, RolloutVerdict

    class SameVerdicts:
        def judge(self, jobs, kind, judging):
            return [RolloutVerdict("verified") for _ in jobs]

    programs = {h: RlProgram(h, 2, "train", "", {}, ("x",), f"prompt {h}") for h in ("a", "b")}
    steps = []
    reward = DecoupledReward(programs, SameVerdicts(), kind="script", judging=Judging(1), speed_on=False,
                             samples_path=tmp_path / "samples.jsonl", samples_kept=2,
                             monitor=RejectionMonitor(window=2, rise=0.2), on_step=steps.append)
    collapsed = ["a"] * 4 + ["b"] * 4
    reward.correctness([], ["one"] * 3 + ["two"] + ["three"] * 4, collapsed)
    assert steps[-1]["distinct_answers"] == {"mean": 1.5, "min": 1}
    assert any("1.5 distinct answers" in warning for warning in steps[-1]["warnings"])
    reward.correctness([], ["p", "q", "r", "s", "t", "u", "v", "w"], collapsed)
    assert steps[-1]["distinct_answers"] == {"mean": 4.0, "min": 4} and steps[-1]["warnings"] == []


def test_a_quick_step_writes_no_stall_report(tmp_path):
    report_path = tmp_path / "stacks.txt"
    with report_path.open("w") as stream:
        report = StallReport(0.5, stream)
        report.arm()
        report.disarm()
        time.sleep(0.7)
    assert report_path.read_text() == ""


CHEATING_MODULE = '''import torch
import triton
import triton.language as tl
from drtriton_task import Model


@triton.jit
def copy(x, y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offsets, tl.load(x + offsets, mask=offsets < n), mask=offsets < n)


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.reference = Model(*args)

    def forward(self, *inputs):
        return self.reference(*inputs)
'''


def first_heldout_program(pool: JudgePool):
    """The first held-out level-1 program captured by `pool`, as RL holds it; its graph and default program."""
    heldout = load_heldout(1)[0]
    [captured] = pool.capture([heldout.source])
    graph = OpGraph.from_json(captured["graph"])
    program = RlProgram(heldout.hash, 1, "validation", heldout.source, captured["graph"],
                        tuple(captured["forward_params"]), formats.script_prompt(graph))
    default = compile_graph(graph, prefix="model", forward_params=captured["forward_params"], has_self=True)
    return program, graph, default


@pytest.mark.slow
def test_the_reward_judges_real_rollouts_with_the_verifier_in_its_pool(tmp_path):
    stats = []
    with JudgePool(2, "cpu") as pool:
        program, graph, default = first_heldout_program(pool)
        keep_all = "".join(f"keep {node.name}\n" for node in graph.nodes) + formats.END_LINE + "\n"
        completions = [formats.script_completion(default.schedule), "kernel nonsense\n### end\n", keep_all]

        def reward_for(kind: str) -> DecoupledReward:
            return DecoupledReward({program.hash: program}, pool, kind=kind,
                                   judging=Judging(trials=2, verify_timeout_s=600.0), speed_on=False,
                                   samples_path=tmp_path / f"samples-{kind}.jsonl", samples_kept=4,
                                   monitor=RejectionMonitor(2, 0.2), on_step=stats.append)

        scripts = reward_for("script")
        hashes = [program.hash] * 3
        assert scripts.correctness([program.prompt] * 3, completions, hashes) == [
            VERIFIED_REWARD, UNPARSED_REWARD, CHEATING_REWARD
        ]
        assert scripts.speed([program.prompt] * 3, completions, hashes) == [0.0, None, None]
        kernels = reward_for("kernel")
        assert kernels.correctness([program.prompt], [formats.kernel_completion(CHEATING_MODULE)], hashes[:1]) == [
            CHEATING_REWARD
        ]
    first, second = stats
    assert first["outcomes"] == {"verified": 1, "rejected": 0, "unparsed": 1, "cheating": 1}
    assert first["rejections"] == {"no_triton_kernel": 1} and first["cheating"] == 1
    assert len(first["parse_failures"]) == 1 and first["correctness"]["min"] == CHEATING_REWARD
    assert second["rejections"] == {"calls_reference": 1} and second["cheating"] == 1
    [line] = (tmp_path / "samples-script.jsonl").read_text().splitlines()
    assert [sample["completion"] for sample in json.loads(line)["accepted"]] == [completions[0]]


@pytest.mark.slow
def test_a_rollout_whose_verification_outlasts_its_limit_is_stopped_and_rejected_for_timeout():
    with JudgePool(1, "cpu") as pool:
        program, _graph, default = first_heldout_program(pool)
        started = time.monotonic()
        # the interpreter's verification takes seconds: a limit of a tenth of one stops it
        [verdict] = pool.judge([(program, formats.script_completion(default.schedule))], "script",
                               Judging(trials=2, verify_timeout_s=0.1))
    assert (verdict.outcome, verdict.reason) == ("rejected", "timeout")
    assert time.monotonic() - started < 60


def test_each_programs_verified_rollouts_are_timed_together_against_eager():
    import math

    from drtriton_training.rewards import UNTIMED_SPEED, RolloutVerdict, with_speeds

    verdicts = [
        RolloutVerdict("verified", module="a1"), RolloutVerdict("rejected", "wrong_result"),
        RolloutVerdict("verified", module="b1"), RolloutVerdict("verified", module="a2"),
        RolloutVerdict("verified", module="c1"),
    ]
    asked: list[dict] = []

    def time_groups(groups):
        asked.append(groups)
        return {"a": {"reference_ms": 2.0, "candidate_ms": [1.0, 4.0]}, "b": {"reference_ms": 3.0, "candidate_ms": [3.0]},
                "c": {"error": "timeout: the job ran past 300 s"}}

    timed = with_speeds(verdicts, ["a", "a", "b", "a", "c"], time_groups)
    assert asked == [{"a": ["a1", "a2"], "b": ["b1"], "c": ["c1"]}]  # one timing worker per program, all at once
    # a rollout whose timing failed counts as far slower than eager, never as fast as it (r_s 0)
    assert [verdict.speed for verdict in timed] == [math.log(2.0), None, 0.0, math.log(0.5), UNTIMED_SPEED]
    assert timed[0].timing == {"eager_ms": 2.0, "triton_ms": 1.0, "method": "time_candidates"}
    assert timed[4].outcome == "verified" and "not timed: timeout" in timed[4].detail
    assert timed[1] is verdicts[1] and all(verdict.module is None for verdict in timed if verdict.outcome == "verified")


def test_a_judging_that_waits_long_says_which_rollout_it_waits_for():
    from concurrent.futures import ThreadPoolExecutor

    from drtriton_training.rewards import wait_reporting

    lines: list[str] = []
    with ThreadPoolExecutor(max_workers=3) as executor:
        futures = [executor.submit(time.sleep, seconds) for seconds in (0.0, 0.3, 0.0)]
        wait_reporting(futures, ["quick", "slow rollout", "quick too"], lines.append, every_s=0.1)
        assert all(future.done() for future in futures)
        assert lines and all(line.endswith("waiting for slow rollout") for line in lines)
        assert lines[0].startswith("judging: 2/3 done after 0 s")
        lines.clear()
        wait_reporting([executor.submit(time.sleep, 0.0)], ["quick"], lines.append, every_s=0.1)
    assert lines == []


def test_each_log_line_says_how_far_into_its_chunk_it_was_written(tmp_path):
    from drtriton_training.rl import RunLog

    run_log = RunLog(tmp_path / "rl_log.jsonl", Curriculum((1, 2), 0.5), "drpo", log=lambda _line: None,
                     started=time.monotonic() - 12.0)
    run_log.write({"event": "eval", "step": 0})
    [record] = log_records(tmp_path)
    assert record["event"] == "eval" and 12.0 <= record["chunk_seconds"] < 60.0


def log_records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "rl_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_rl_tiny_runs_end_to_end_advances_its_curriculum_and_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    command = ["rl", "--config", "tiny", "--out", str(run), "--advance-threshold", "0.0"]
    assert cli.main([*command, "--resume", "--steps", "1"]) == 1
    assert "holds no checkpoint" in capsys.readouterr().err
    assert cli.main([*command, "--steps", "2"]) == 0
    assert "speed term off on the CPU" in capsys.readouterr().err
    records = log_records(run)
    start, second = [record for record in records if record["event"] == "eval"]
    assert (start["step"], start["level"], start["advanced_to"]) == (0, 1, 2)
    assert (second["step"], second["level"], second["advanced_to"]) == (2, 2, None)  # the last level stays
    steps = [record for record in records if record["event"] == "step"]
    assert [record["step"] for record in steps] == [1, 2]
    assert steps[0]["chunk_seconds"] <= steps[1]["chunk_seconds"]
    # each step's sampling is logged with its seconds, before the step's judging
    generations = [record for record in records if record["event"] == "generation"]
    assert len(generations) == 2 and all(record["rollouts"] == 8 and record["seconds"] >= 0 for record in generations)
    assert generations[1]["chunk_seconds"] <= steps[1]["chunk_seconds"]
    for record in steps:
        assert record["level"] == 2 and record["prompt_levels"] == [2] and "pass@1" in record
        assert record["rollouts"] == 8
        assert set(record["correctness"]) == {"mean", "min", "max"} and sum(record["outcomes"].values()) == 8
    # rollouts are held to the script grammar: even this noise-writing model finishes whole scripts (free, none parse)
    assert sum(record["outcomes"]["unparsed"] for record in steps) < sum(record["rollouts"] for record in steps)
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert [sample["step"] for sample in samples] == [1, 2]
    manifest = json.loads((run / "model" / "drtriton_model.json").read_text())
    assert manifest["steps"] == 2 and manifest["complete"] and manifest["rl"]["objective"] == "drpo"
    assert list((run / "model").glob("*.safetensors"))

    assert cli.main([*command, "--steps", "3"]) == 1
    assert "already holds an RL run" in capsys.readouterr().err
    assert cli.main([*command, "--steps", "3", "--objective", "grpo", "--resume"]) == 1
    assert cli.main([*command, "--steps", "3", "--resume"]) == 0
    assert "resuming from checkpoint-2 at level 2" in capsys.readouterr().err
    records = log_records(run)
    assert [record["step"] for record in records if record["event"] == "step"] == [1, 2, 3]
    assert [record["step"] for record in records if record["event"] == "eval"] == [0, 2]
    state = json.loads((run / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert json.loads((run / "checkpoints" / "checkpoint-3" / "curriculum.json").read_text())["index"] == 1


def test_a_step_with_a_nan_gradient_is_skipped_logged_and_its_batch_kept(tmp_path, monkeypatch, capsys):
    from drtriton_training import rl as rl_module

    real_drop = rl_module.drop_non_finite_gradients

    def poisoned(model):  # as on the H200: one backward gives a NaN gradient
        next(p for p in model.parameters() if p.grad is not None).grad.view(-1)[0] = float("nan")
        return real_drop(model)

    monkeypatch.setattr(rl_module, "drop_non_finite_gradients", poisoned)
    run = tmp_path / "run"
    assert cli.main(["rl", "--config", "tiny", "--out", str(run), "--steps", "1", "--objective", "grpo"]) == 0
    assert "the model was left as it was this step" in capsys.readouterr().err
    [skipped] = [record for record in log_records(run) if record["event"] == "skipped_update"]
    assert skipped["step"] == 1 and skipped["non_finite_gradients"] >= 1
    saved = torch.load(skipped["batch"])
    assert saved["batch"]["completion_ids"].shape[0] == RECIPES["tiny"].rollouts_per_step
    from safetensors.torch import load_file

    def weights(directory):
        return {name: tensor for path in sorted(directory.glob("*.safetensors")) for name, tensor in
                load_file(path).items()}

    before, after = weights(run / "initial_model"), weights(run / "model")
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name].float(), after[name].float()) for name in before)
    assert all(torch.equal(before[name].float(), saved["weights"][name].float()) for name in before)
    probe = subprocess.run([sys.executable, str(REPOSITORY / "training" / "scripts" / "non_finite_probe.py"),
                            skipped["batch"], "--model", str(run / "initial_model")],
                           capture_output=True, text=True, timeout=300, check=True)
    replays = [line for line in probe.stdout.splitlines() if "head: loss" in line]
    assert len(replays) == 8  # the step's gradient was poisoned by the test, so every honest replay is finite
    assert all("non-finite gradients in 0 parameters" in line for line in replays), probe.stdout


def test_the_recipe_attention_reaches_the_policy_and_its_reference(tmp_path, monkeypatch):
    import trl.trainer.grpo_trainer as grpo_trainer

    loaded = []
    real_create = grpo_trainer.create_model_from_path

    def recording_create(path, **kwargs):
        loaded.append(kwargs.get("attn_implementation"))
        return real_create(path, **kwargs)

    monkeypatch.setattr(grpo_trainer, "create_model_from_path", recording_create)
    run = tmp_path / "run"
    assert cli.main(["rl", "--config", "tiny", "--out", str(run), "--steps", "1", "--objective", "grpo",
                     "--set", "attn_implementation=eager"]) == 0
    assert loaded == ["eager", "eager"]  # the policy, then the reference the KL term holds it to
    assert RECIPES["small"].attn_implementation == "eager"  # bf16 SDPA's backward gave NaN gradients on the H200
    with pytest.raises(ValueError, match="attn_implementation is sdpa or eager"):
        recipe("tiny", ["attn_implementation=flash"])


def test_a_chunk_stops_before_a_step_as_long_as_its_longest_would_pass_its_time_limit():
    from transformers import TrainerControl

    from drtriton_training.sft import time_limit_callback

    now = [0.0]
    limit = time_limit_callback(100.0, started=0.0, clock=lambda: now[0])
    stops = []
    for seconds in (20, 20, 45):  # a step at a harder level takes twice as long
        control = TrainerControl()
        limit.on_step_begin(None, None, control)
        now[0] += seconds
        stops.append(limit.on_step_end(None, None, control).should_training_stop)
    # after 40 s, 45 more would still fit; after 85 s, another 45 would not (the old rule started a step at 85 s
    # that the caller's kill at its limit would cut, losing the chunk's steps)
    assert stops == [False, False, True] and limit.stopped
    unlimited = time_limit_callback(None, started=0.0, clock=lambda: now[0])
    unlimited.on_step_begin(None, None, TrainerControl())
    now[0] += 1000
    assert not unlimited.on_step_end(None, None, TrainerControl()).should_training_stop
