"""benchmarks/grpo_reference.py (playpen's GRPO against TRL's stock GRPOTrainer on arith_solver):
its quick mode end to end with the tiny random model — both arms from one start adapter, the
prompts and rewards of playpen's game episodes the ones the stock arm is given, both trained
in fp32, the per-step reward curves, the accuracy at every checkpoint and the TOST summary."""
import json
import math
from pathlib import Path

import pytest
from test_dpo_reference_benchmark import make_start, weights

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("grpo_reference")


def test_the_quick_mode_end_to_end_with_a_tiny_model(bench, tiny_workspace, tiny_model_dir, monkeypatch):
    import harness
    import torch
    from transformers import AutoTokenizer
    # the smallest groups that still train (2 answers to 1 prompt a step): the full ones cost 30 s here
    for key, value in {"num_generations": 2, "prompts_per_step": 1, "max_tokens": 8}.items():
        monkeypatch.setitem(bench.COMMON, key, value)
    out = tiny_workspace / "grpo-work"
    start = make_start(tiny_model_dir, harness.start_path(out, "tiny-random", 16, 1))  # no SFT: a random start
    argv = ["-l", "tiny-random", "--seeds", "1", "--out", str(out), "--steps", "2", "--eval-every", "1",
            "--problems", "4"]
    published = set(BENCHMARKS.glob("results/grpo-reference-*.json"))
    assert bench.main(argv) == 0
    assert set(BENCHMARKS.glob("results/grpo-reference-*.json")) == published  # a quick run never publishes
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["problems"] == 4 and summary["settings"] == bench.COMMON
    row = summary["seeds"]["1"]
    assert len(row["step-0"]) == 4 and summary["start"] == {"1": harness.percent(row["step-0"])}
    for arm in ("playpen", "stock"):
        assert len(row[arm]["reward_curve"]) == 2, arm  # one mean reward per step
        assert all(-1.0 <= r <= 1.0 for r in row[arm]["reward_curve"])
        assert set(row[arm]["correct"]) == set(row[arm]["accuracy"]) == {"1", "2"}
        assert all(len(items) == 4 and set(items) <= {0, 1} for items in row[arm]["correct"].values())
        assert row[arm]["accuracy"] == {k: harness.percent(v) for k, v in row[arm]["correct"].items()}
    assert summary["difference_at_last_step"] == [row["playpen"]["accuracy"]["2"] - row["stock"]["accuracy"]["2"]]
    assert isinstance(summary["tost_p_5_points"], float) and 0.0 <= summary["tost_p_5_points"] <= 1.0

    # the stock arm's prompt, [user: solver_prompt(problem)] under the chat template, is what the
    # game rendered for playpen's episodes (text and token count), and its reward the game's
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    playpen_run = out / "seed-1" / "models" / "grpo+lora" / "tiny-random" / "selfplay"
    log = [json.loads(line) for line in (playpen_run / "playpen-log.jsonl").read_text().splitlines()]
    rewards = {r["path"]: r["rewards"]["Player 1"] for r in log if r["event"] == "episode"}
    assert len(rewards) == 2 * 2  # 2 steps, 1 prompt of 2 answers each
    steps, episode_rewards = [], []  # playpen's curve: the mean reward of each step's episodes
    for r in log:
        if r["event"] == "episode":
            episode_rewards.append(r["rewards"]["Player 1"])
        elif r["event"] == "train_step":
            steps.append(sum(episode_rewards) / len(episode_rewards))
            episode_rewards = []
    assert row["playpen"]["reward_curve"] == pytest.approx(steps)
    for folder, reward in rewards.items():
        path = Path(folder) / "player_1.requests.json"
        problem = json.loads((path.parent / "instance.json").read_text())["problem"]
        assert problem in harness.train_problems()
        call = json.loads(path.read_text())["calls"][0]["call"]
        ids = tokenizer.apply_chat_template([{"role": "user", "content": harness.solver_prompt(problem)}],
                                            add_generation_prompt=True, tokenize=True, return_dict=False)
        assert call["manipulated_prompt_obj"]["inputs"] == tokenizer.decode(ids)
        assert call["manipulated_prompt_obj"]["num_prompt_tokens"] == len(ids)
        reply = call["raw_response_obj"]["response"]
        assert harness.reward_of(reply, problem) == reward, (reply, problem)

    # both arms in fp32 (TRL's configs default to bf16 autocast: the stock arm once ran in it),
    # both moved every adapter away from the same start
    before = weights(start)
    for run in (playpen_run, out / "seed-1" / "stock"):
        args = torch.load(run / "checkpoint-2" / "training_args.bin", weights_only=False)
        assert (args.bf16, args.fp16) == (False, False), run
        trained = weights(run / "checkpoint-2")
        assert set(trained) == set(before) and {t.dtype for t in trained.values()} == {torch.float32}, run
        assert any(not torch.equal(trained[k], before[k]) for k in before), f"{run} equals the start"

    # a second run reads each seed's result back: nothing trained or evaluated again
    stamp = (out / "seed-1" / "result.json").stat().st_mtime_ns
    assert bench.main(argv) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["seeds"] == summary["seeds"] and (out / "seed-1" / "result.json").stat().st_mtime_ns == stamp


    # an arm killed after its first checkpoint goes on from it: step 1 is not trained again
    import shutil
    for run in (playpen_run, out / "seed-1" / "stock"):
        shutil.rmtree(run / "checkpoint-2")
    (out / "seed-1" / "result.json").unlink()
    for arm in ("playpen", "stock"):
        (out / "seed-1" / "correct" / f"{arm}-2.json").unlink()
    first = {run: (run / "checkpoint-1" / "adapter_model.safetensors").stat().st_mtime_ns
             for run in (playpen_run, out / "seed-1" / "stock")}
    assert bench.main(argv) == 0
    resumed = json.loads((out / "summary.json").read_text())["seeds"]["1"]
    for run, stamp in first.items():
        assert (run / "checkpoint-2" / "adapter_model.safetensors").exists(), run
        assert (run / "checkpoint-1" / "adapter_model.safetensors").stat().st_mtime_ns == stamp, run
    for arm in ("playpen", "stock"):
        assert len(resumed[arm]["reward_curve"]) == 2, arm  # step 2 once, though the playpen log holds it twice
        assert resumed[arm]["reward_curve"][0] == row[arm]["reward_curve"][0], arm
    steps = [r["step"] for r in map(json.loads, (playpen_run / "playpen-log.jsonl").read_text().splitlines())
             if r["event"] == "train_step"]
    assert steps == [1, 2, 2]
