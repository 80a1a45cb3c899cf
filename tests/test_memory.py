"""Memory and time of training steps (issue 11): the step's own peak RSS in every log
line, GRPO's time split, no old-policy pass when rows are used once, micro-batches, and
memory that does not grow from step to step (tiny model, a few seconds)."""
import gc
import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.inference.transformers_compat import checkpointing_on
from playpen.training.common import memory
from playpen.training.grpo import steps as grpo_steps

from test_grpo import SP_TRAINER

PHASES = ("time/rollout_s", "time/forward_s", "time/backward_s", "time/optimizer_s", "time/other_s")


def read_steps(run_dir):
    lines = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    return [line for line in lines if line["event"] == "train_step"]


# ----------------------------------------------------------------------------- the parts

def test_peak_is_the_peak_since_the_reset():
    if not memory.reset_peak():
        pytest.skip("this kernel does not reset VmHWM")
    block = bytearray(300 * 2**20)  # 300 MB, touched: resident
    for i in range(0, len(block), 4096):
        block[i] = 1
    with_block = memory.peak_rss_mb()
    del block
    memory.release_memory()
    assert memory.reset_peak()
    after = memory.peak_rss_mb()
    assert with_block - after > 250, (with_block, after)
    metrics = memory.memory_metrics()
    assert metrics["memory/peak_rss_mb"] >= metrics["memory/rss_mb"] > 0
    assert metrics["memory/process_peak_rss_mb"] >= with_block - 1


def test_a_training_heap_freezes_what_was_there_and_collects_what_the_run_made():
    """Per-step collections walked every object of the process (0.33 s with torch, TRL and
    clemcore imported, once or twice a step); inside a training heap they walk only the
    run's own objects, and cyclic garbage the run makes is still freed."""
    import gc
    import weakref

    class Node:
        pass

    before = Node()
    before.me = before  # a cycle from before the run
    assert gc.get_freeze_count() == 0
    with memory.training_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 1000
        since = [Node() for _ in range(1000)]  # made inside the run: a second freeze would take them in
        with memory.training_heap():  # nested: the outer one keeps the freeze
            pass
        # not more (another thread, e.g. pytest-xdist's, may free a frozen object meanwhile)
        assert gc.get_freeze_count() <= frozen
        del since
        made = Node()
        made.me = made
        gone = weakref.ref(made)
        del made
        memory.release_memory()
        assert gone() is None  # the run's own cyclic garbage is collected
        old = weakref.ref(before)
        del before
        memory.release_memory()
        assert old() is not None  # frozen: waits for the run's end
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert old() is None
    with pytest.raises(RuntimeError), memory.training_heap():
        raise RuntimeError("a run that fails")
    assert gc.get_freeze_count() == 0


def test_step_clock_splits_a_step():
    import time
    clock = memory.StepClock()
    clock.start()
    with clock.phase("rollout"):
        time.sleep(0.05)
    clock.add("backward", 0.004)
    clock.add("backward", 0.006)
    time.sleep(0.03)
    split = clock.metrics()
    assert split["time/rollout_s"] >= 0.05 and split["time/backward_s"] == pytest.approx(0.01)
    assert split["time/step_s"] >= 0.08
    assert split["time/other_s"] == pytest.approx(split["time/step_s"] - split["time/rollout_s"] - 0.01, abs=2e-3)


@pytest.mark.parametrize("rows, wanted, micro", [(16, 4, 4), (16, 3, 2), (6, 4, 3), (4, 8, 4), (7, 2, 1)])
def test_micro_batches_divide_the_step(rows, wanted, micro):
    args = grpo_steps.step_args(rows, wanted, True)
    assert args["per_device_train_batch_size"] == micro
    # generated once, used once: one optimizer step per generation batch, no old-policy pass
    assert args["gradient_accumulation_steps"] == args["steps_per_generation"] == rows // micro
    assert args["num_iterations"] == 1 and checkpointing_on(SimpleNamespace(**args))


# ----------------------------------------------------------------------------- a GRPO run

def run_grpo(workspace, *options):
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "-T", "1.0", "-L", "3",
                                      "--games", "sayword", "--train-instances", "instances", "--no-evaluate",
                                      "--num-generations", "4", "--groups-per-step", "2", *options])
    assert result.exit_code == 0, result.output
    return workspace / "models" / "grpo+lora" / "tiny-random" / "selfplay"


def test_grpo_log_has_the_step_peak_and_its_time_split(toy_workspace, monkeypatch):
    from playpen.training import trl_trainers
    frozen = []  # the objects frozen when a rollout's garbage is collected

    def release_memory():
        frozen.append(gc.get_freeze_count())
        memory.release_memory()
    monkeypatch.setattr(trl_trainers, "release_memory", release_memory)
    run_dir = run_grpo(toy_workspace, "--max-steps", "2", "--micro-batch-size", "2", "--beta", "0")
    steps = read_steps(run_dir)
    assert [s["step"] for s in steps] == [1, 2]  # 8 rows in 4 micro-batches are still one step
    assert len(frozen) == 2 and min(frozen) > 1000  # the steps ran inside the run's training heap
    assert gc.get_freeze_count() == 0  # which ended with it
    for step in steps:
        assert 50 < step["memory/peak_rss_mb"] <= step["memory/process_peak_rss_mb"] + 1
        assert step["memory/rss_mb"] > 50
        for key in PHASES:
            assert step[key] >= 0, key
        assert step["time/rollout_s"] > 0 and step["time/backward_s"] > 0
        parts = sum(step[k] for k in PHASES)
        assert parts == pytest.approx(step["time/step_s"], abs=0.01)
        # beta 0 and rows used once: no log-prob pass besides the training forward
        assert "time/logprob_s" not in step


def test_grpo_memory_stays_flat_from_step_to_step(toy_workspace, monkeypatch):
    """Tensors alive after each step (counted by storage, so views count once) and the
    resident memory a step leaves behind: neither grows over 5 steps once the first step
    has allocated what stays (the optimizer's state)."""
    import gc

    import torch
    from playpen.callbacks import BaseCallback
    from playpen.training.common import lifecycle as training

    alive, resident = [], []

    def tensor_bytes() -> int:
        seen, total = set(), 0
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor) and not obj.is_meta:
                    storage = obj.untyped_storage()
                    if storage.data_ptr() not in seen:
                        seen.add(storage.data_ptr())
                        total += storage.nbytes()
            except (RuntimeError, ReferenceError):
                continue
        return total

    class Measure(BaseCallback):
        def _on_train_step(self, step, metrics):
            assert metrics["time/logprob_s"] > 0  # with a KL term: the reference pass, the one no-grad pass
            memory.release_memory()
            alive.append(tensor_bytes())
            resident.append(memory.rss_mb())  # what the step left behind
            return True

    original = training.make_trainer_callback

    def with_measure(callbacks, *args, **kwargs):
        from playpen.callbacks import CallbackList
        return original(CallbackList([callbacks, Measure()]), *args, **kwargs)
    monkeypatch.setattr(training, "make_trainer_callback", with_measure)
    # (a later option wins: 2 groups of 2 rows per step, in micro-batches of 2)
    run_grpo(toy_workspace, "--max-steps", "5", "--num-generations", "2", "--micro-batch-size", "2", "--beta", "0.02")
    assert len(alive) == 5
    # after step 1 (the optimizer's state exists from then on) nothing accumulates
    assert max(alive[1:]) <= alive[1] + 64 * 1024, alive
    assert max(resident[2:]) <= resident[1] * 1.03, resident


def test_trl_is_quiet_about_rows_whose_role_never_had_a_turn(caplog):
    """playpen's NaN rewards for a role that never got a turn are on purpose: TRL's warning
    about them is filtered, its other warnings are not."""
    import logging

    import playpen.training.trl_trainers  # noqa: F401  (importing it installs the filter)
    logger = logging.getLogger("trl.trainer.grpo_trainer")  # what TRL's accelerate logger adapter wraps
    with caplog.at_level(logging.WARNING, logger="trl.trainer.grpo_trainer"):
        logger.warning("[RANK 0] All reward functions returned None for the following kwargs:\n{...}")
        logger.warning("something else went wrong")
    messages = [r.getMessage() for r in caplog.records]
    assert not any("All reward functions returned None" in m for m in messages)
    assert any("something else went wrong" in m for m in messages)
