"""benchmarks/dpo_reference.py (playpen's DPO against TRL's stock DPOTrainer on arith_solver, one
short run): its pairs, and its quick mode end to end with the tiny random model — the start read
from another work folder (--start-from), both arms trained on one pairs file, the token ids of the
stock trainer checked against playpen's, the held-out comparison written to the work folder."""
import json
from argparse import Namespace
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("dpo_reference")


def test_a_problem_gives_pairs_only_with_a_right_and_a_wrong_answer(bench):
    samples = [{"problem": "1 + 2", "reply": r, "reward": w} for r, w in
               [("ANSWER: 3", 1.0), ("ANSWER: 3", 1.0), ("ANSWER: 03", 1.0), ("ANSWER: 4", 0.0), ("?", -1.0),
                ("ANSWER: 5", 0.0)]]
    samples += [{"problem": "2 * 3", "reply": "ANSWER: 6", "reward": 1.0},
                {"problem": "4 - 1", "reply": "ANSWER: 2", "reward": 0.0}]
    pairs = bench.make_pairs(samples, per_problem=4, total=100, seed=0)
    assert len(pairs) == 4  # 4 of the 2 x 3 distinct (right, wrong); the other problems have one side only
    assert len({(p.chosen, p.rejected) for p in pairs}) == 4
    assert {p.chosen for p in pairs} <= {"ANSWER: 3", "ANSWER: 03"}
    assert {p.rejected for p in pairs} <= {"ANSWER: 4", "?", "ANSWER: 5"}
    assert all(p.meta["problem"] == "1 + 2" and p.prompt[0]["role"] == "user" for p in pairs)
    assert len(bench.make_pairs(samples, per_problem=9, total=100, seed=0)) == 6
    assert len(bench.make_pairs(samples, per_problem=1, total=100, seed=0)) == 1
    assert len(bench.make_pairs(samples, per_problem=4, total=1, seed=0)) == 1


def make_start(model_dir, folder: Path) -> Path:
    """A random, non-zero LoRA adapter (an update from it shows in every weight)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05, target_modules="all-linear",
                                      init_lora_weights=False, task_type="CAUSAL_LM"))
    model.save_pretrained(folder)
    return folder


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(folder / "adapter_model.safetensors")


def test_the_quick_mode_end_to_end_with_a_tiny_model(bench, tiny_workspace, tiny_model_dir):
    import harness
    from playpen.pairs import write_pairs
    grpo_work = tiny_workspace / "grpo-work"
    start = make_start(tiny_model_dir, harness.start_path(grpo_work, "tiny-random", 16, 1))
    out = tiny_workspace / "dpo-work"

    # sampling runs (the random model answers nothing right: each answer scored by the game)
    samples = bench.sample_answers(Namespace(learner="tiny-random", k=1), start, seed=1)
    assert len(samples) == len(harness.train_problems())
    assert {s["reward"] for s in samples} <= {-1.0, 0.0, 1.0}

    # so the pairs file is written first, as the script writes it: right and wrong answers to 8 problems
    data = json.loads((harness.ARITH_GAME / "in" / f"{harness.ARITH_TRAIN}.json").read_text())
    answers = {i["problem"]: i["answer"] for e in data["experiments"] for i in e["game_instances"][:2]}
    made = bench.make_pairs([{"problem": p, "reply": f"ANSWER: {a + d}", "reward": float(d == 0)}
                             for p, a in answers.items() for d in (0, 1)], per_problem=1, total=8, seed=1)
    assert len(made) == 8
    write_pairs(made, out / "seed-1" / "pairs.jsonl")

    argv = ["-l", "tiny-random", "--start-from", str(grpo_work), "--out", str(out), "--k", "2", "--pairs", "8",
            "--steps", "2", "--problems", "8"]
    published = set(BENCHMARKS.glob("results/dpo-reference-*.json"))
    assert bench.main(argv) == 0
    assert set(BENCHMARKS.glob("results/dpo-reference-*.json")) == published  # a quick run never publishes
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairs"] == 8 and summary["problems"] == 8 and summary["start_adapter"] == str(start)
    assert set(summary["accuracy"]) == {"start", "playpen", "stock"}
    assert all(len(summary["correct"][arm]) == 8 for arm in summary["accuracy"])
    for name in ("playpen_minus_stock", "playpen_minus_start", "stock_minus_start"):
        assert {"mean_points", "sign_flip_p", "tost_p_5_points"} <= set(summary[name])
        assert 0.0 <= summary[name]["sign_flip_p"] <= 1.0
    assert len(summary["loss"]["playpen"]) == len(summary["loss"]["stock"]) == 2
    # both arms start where the reference is: DPO's first loss is log 2 in both
    assert summary["loss"]["playpen"][0] == pytest.approx(0.6931, abs=1e-3)
    assert summary["loss"]["stock"][0] == pytest.approx(0.6931, abs=1e-3)
    # the same pairs in the same batches: the second step's loss (after one update) agrees too
    assert summary["loss_max_difference"] < 1e-5, summary["loss"]

    before = weights(start)
    for after in (out / "seed-1" / "models" / "dpo+lora" / "tiny-random" / "pairs" / "checkpoint-2",
                  out / "seed-1" / "stock" / "checkpoint-2"):
        trained = weights(after)
        assert set(trained) == set(before), after
        assert any(not (trained[k] == before[k]).all() for k in before), f"{after} equals the start"

    # a start that is not there is one line and exit 2, nothing written
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv[:2], "--start-from", str(tiny_workspace / "nowhere"), "--out", str(tiny_workspace / "x")])
    assert stop.value.code == 2 and not (tiny_workspace / "x").exists()
