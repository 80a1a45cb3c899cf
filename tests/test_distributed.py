"""Data-parallel training (playpen.distributed, playpen.launch, `playpen run --num-processes`):
who a rank is and what only rank 0 writes; the launcher's options and its one-line errors;
SFT and GRPO on 2 CPU processes (gloo) give the adapter of one process on the same global
batch, with the shared files written by rank 0 only (slow: each run starts processes)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen import distributed
from playpen.cli import cli
from playpen.training.common import lifecycle as training


REPO_ROOT = Path(__file__).resolve().parents[1]
SFT_TRAINER = "sft"
SP_TRAINER = "grpo"
DPO_TRAINER = "dpo"
REPLAY_TRAINER = REPO_ROOT / "tests" / "fixtures" / "distributed" / "grpo_replay_trainer.py"
TOYGAMES = REPO_ROOT / "tests" / "toygames"


def as_rank(monkeypatch, rank: int, world: int = 2) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))


# ----------------------------------------------------------------------------- who a rank is

def test_outside_a_launch_this_process_is_the_only_rank(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert (distributed.rank(), distributed.world_size(), distributed.is_main()) == (0, 1, True)
    assert distributed.device_map() is None and distributed.rank_suffix() == ""
    assert distributed.gather_objects({"a": 1}) == [{"a": 1}]
    assert distributed.from_main([1, 2]) == [1, 2] and distributed.any_rank(True) is True
    columns, mine = distributed.gather_columns({"reward": [1.0, 0.0], "role": ["A", "B"]})
    assert columns["role"] == ["A", "B"] and mine == slice(0, 2)


def test_a_rank_names_its_files_and_its_share(monkeypatch, tmp_path):
    as_rank(monkeypatch, 1, 3)
    assert not distributed.is_main() and distributed.rank_suffix() == "-rank1"
    assert distributed.rank_file(tmp_path / "playpen-log.jsonl") == tmp_path / "playpen-log.rank1.jsonl"
    assert distributed.device_map() == {"": "cpu"}  # no GPU here: every rank on the CPU
    from playpen.rollouts.records import default_run_name
    assert default_run_name().endswith("-rank1")
    items = list(range(8))
    shares = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        shares.append(distributed.shard(items))
    assert [len(s) for s in shares] == [2, 3, 3] and sum(shares, []) == items
    monkeypatch.setenv("RANK", "0")
    assert distributed.rank_file(tmp_path / "playpen-log.jsonl") == tmp_path / "playpen-log.jsonl"


def test_only_rank_0_takes_the_run_folder_lock(monkeypatch, tmp_path):
    run_dir = tmp_path / "run"
    as_rank(monkeypatch, 0)
    held = training.lock_run_folder(run_dir)
    assert held.held
    as_rank(monkeypatch, 1)
    other = training.lock_run_folder(run_dir)  # rank 1: no error, and it holds nothing
    assert not other.held
    other.release()
    assert held.held and (run_dir / ".playpen.lock").exists()
    held.release()


def test_groups_must_be_shared_whole():
    distributed.check_groups(4, 2)
    from playpen.errors import PlaypenError
    with pytest.raises(PlaypenError, match="--groups-per-step: 3 groups cannot be shared by 2 processes"):
        distributed.check_groups(3, 2)


# ----------------------------------------------------------------------------- the launcher

def test_launch_arguments_on_a_cpu():
    from playpen.launch import launch_arguments
    args = launch_arguments(["run", "t.py", "-l", "m"], 2, port=29999)
    assert args[:args.index("--module")] == [
        "--multi_gpu", "--num_processes", "2", "--main_process_port", "29999", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--num_cpu_threads_per_process",
        str(max(1, (os.cpu_count() or 1) // 2))]
    assert args[args.index("--module"):] == ["--module", "playpen", "run", "t.py", "-l", "m"]
    with_config = launch_arguments(["run"], None, "cfg.yaml")
    assert with_config == ["--config_file", "cfg.yaml", "--module", "playpen", "run"]


@pytest.mark.parametrize("args, expected", [
    (["--num-processes", "0"], "option --num-processes: 0 is not valid; expected an integer >= 1"),
    (["--num-processes", "-2"], "option --num-processes: -2 is not valid; expected an integer >= 1"),
    (["--num-processes", "two"], "'two' is not a valid integer"),
    (["--num-processes", "2", "--accelerate-config", "missing.yaml"],
     "option --accelerate-config: 'missing.yaml' is not a file"),
])
def test_bad_num_processes_is_one_line_and_exit_2(tiny_workspace, args, expected):
    result = CliRunner().invoke(cli, ["run", str(SFT_TRAINER), "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert not (tiny_workspace / "models").exists()


def test_accelerate_configs_parse_and_a_broken_one_is_refused(tiny_workspace):
    from accelerate.commands.config.config_args import load_config_from_file
    ddp = load_config_from_file(str(REPO_ROOT / "examples" / "accelerate" / "ddp.yaml"))
    zero3 = load_config_from_file(str(REPO_ROOT / "examples" / "accelerate" / "deepspeed_zero3.yaml"))
    assert ddp.distributed_type.value == "MULTI_GPU" and zero3.distributed_type.value == "DEEPSPEED"
    assert zero3.deepspeed_config["zero_stage"] == 3 and zero3.deepspeed_config["zero3_init_flag"] is False
    (tiny_workspace / "broken.yaml").write_text("distributed_type: [MULTI_GPU\n")
    result = CliRunner().invoke(cli, ["run", str(SFT_TRAINER), "-l", "tiny-random", "--accelerate-config",
                                      "broken.yaml"])
    assert result.exit_code == 2 and "option --accelerate-config: broken.yaml is no accelerate config file" \
        in result.output, result.output


def test_options_are_checked_before_any_process_starts(toy_workspace):
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "--games", "sayword",
                                      "--groups-per-step", "3", "--num-processes", "2"])
    assert result.exit_code == 2 and "3 groups cannot be shared by 2 processes" in result.output
    result = CliRunner().invoke(cli, ["run", str(SFT_TRAINER), "-l", "tiny-random", "--max-steps", "0",
                                      "--num-processes", "2"])
    assert result.exit_code == 2 and "option --max-steps: 0 is not valid" in result.output


def test_a_rank_does_not_launch_again(tiny_workspace, monkeypatch):
    as_rank(monkeypatch, 0)
    result = CliRunner().invoke(cli, ["run", str(SFT_TRAINER), "-l", "tiny-random", "--num-processes", "2"])
    assert result.exit_code == 2 and "already one of a launched run's ranks" in result.output


# ----------------------------------------------------------------------------- runs on 2 processes

def playpen(workspace: Path, *args, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "playpen", *map(str, args)], cwd=workspace, capture_output=True,
                          text=True, env=env, timeout=timeout)


def adapter(checkpoint: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(checkpoint / "adapter_model.safetensors")


TOLERANCE = 1e-5
"""Largest difference of a weight allowed between the runs: sums in another order differ in
the last bits, and Adam's step (lr x sign for tiny gradients) carries that into the weights;
one optimizer step moves them by more than 100 x this (checked)."""


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[name] - b[name]).abs().max()) for name in a)


def assert_same_training(run_a: Path, run_b: Path, steps: int) -> None:
    """The runs' last adapters are equal within TOLERANCE, one step apart they are not."""
    last_a, last_b = adapter(run_a / f"checkpoint-{steps}"), adapter(run_b / f"checkpoint-{steps}")
    assert max_difference(last_a, last_b) <= TOLERANCE, max_difference(last_a, last_b)
    assert max_difference(last_a, adapter(run_a / f"checkpoint-{steps - 1}")) > 100 * TOLERANCE
    # LoRA's B starts at 0: a trained adapter has moved it
    assert any(w.abs().sum() > 0 for n, w in last_a.items() if "lora_B" in n), "the adapter did not train"


def only_rank_0_wrote(run_dir: Path, steps: int) -> None:
    """The run folder holds rank 0's files once: one log with one line per step, one summary."""
    names = sorted(p.name for p in run_dir.iterdir())
    assert not [n for n in names if ".rank" in n], names  # SFT/GRPO's step lines: rank 0 only
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["event"] == "train_step"] == list(range(1, steps + 1))
    assert (run_dir / "playpen-run.json").exists() and (run_dir / "learning-curve.png").exists()
    assert not (run_dir / ".playpen.lock").exists()


@pytest.mark.slow
def test_sft_on_two_processes_equals_one_process_on_the_same_global_batch(tiny_workspace):
    common = ["run", SFT_TRAINER, "-l", "tiny-random", "--games", "referencegame", "--demo-max-instances", "1",
              "--max-steps", "2", "--max-length", "300", "--save-steps", "1", "--lora-dropout", "0",
              "--learning-rate", "1e-3", "--no-evaluate"]
    two = playpen(tiny_workspace, *common, "--batch-size", "1", "--models-dir", "models-2", "--num-processes", "2")
    assert two.returncode == 0, two.stderr[-4000:]
    one = playpen(tiny_workspace, *common, "--batch-size", "2", "--models-dir", "models-1")
    assert one.returncode == 0, one.stderr[-4000:]
    run2 = tiny_workspace / "models-2" / "sft+lora" / "tiny-random"
    run1 = tiny_workspace / "models-1" / "sft+lora" / "tiny-random"
    assert [p.name for p in training.checkpoints(run2)] == ["checkpoint-1", "checkpoint-2"]
    assert_same_training(run2, run1, 2)
    only_rank_0_wrote(run2, 2)
    assert two.stdout.count("[playpen] adapter:") == 1  # rank 0 alone closes the run
    # rank 0 played the demonstrations once; rank 1 read them (one run folder, complete)
    demos = tiny_workspace / "playpen-records" / "demonstrations" / "instances_train" / "programmatic"
    assert (demos / "playpen-demonstrations.json").exists()


@pytest.fixture
def yes_workspace(toy_workspace, yesno_model_dir):
    """toy_workspace + `tiny-yesno`; sayword's training instances all ask for "yes"."""
    import shutil
    games = toy_workspace / "toygames"
    shutil.copytree(TOYGAMES / "sayword", games / "sayword")
    (games / "sayword" / "in" / "instances_train.json").write_text(json.dumps({"experiments": [
        {"name": "words", "game_instances": [{"game_id": i, "word": "yes"} for i in range(8)]}]}))
    entries = json.loads((toy_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-yesno", "huggingface_id": str(yesno_model_dir)})
    (toy_workspace / "model_registry.json").write_text(json.dumps(entries))
    (toy_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    return toy_workspace


@pytest.mark.slow
def test_grpo_on_two_processes_equals_one_process_on_the_same_rollouts(yes_workspace, tmp_path):
    """Sampling differs with the batch a rank generates, so one process replays the two
    ranks' recorded rollouts (the trainer file below): the same global batch, in order."""
    rollouts = tmp_path / "rollouts"
    common = ["run", REPLAY_TRAINER, "-l", "tiny-yesno", "-T", "1.0", "-L", "3", "--games", "sayword",
              "--max-steps", "2", "--num-generations", "4", "--groups-per-step", "2", "--learning-rate", "3e-3",
              "--lora-r", "8", "--beta", "0.02", "--reward", "binary", "--save-steps", "1", "--no-evaluate",
              "--rollouts", rollouts]
    two = playpen(yes_workspace, *common, "--models-dir", "models-2", "--num-processes", "2")
    assert two.returncode == 0, two.stderr[-4000:]
    recorded = sorted(p.name for p in rollouts.iterdir())
    assert recorded == ["call0-rank0.json", "call0-rank1.json", "call1-rank0.json", "call1-rank1.json"]
    one = playpen(yes_workspace, *common, "--models-dir", "models-1", "--replay")
    assert one.returncode == 0, one.stderr[-4000:]
    run2 = yes_workspace / "models-2" / "grpo+lora" / "tiny-yesno" / "selfplay"
    run1 = yes_workspace / "models-1" / "grpo+lora" / "tiny-yesno" / "selfplay"
    assert_same_training(run2, run1, 2)
    # rollouts sharded: each rank played its own groups (4 episodes each per step) into its own run folders
    records = yes_workspace / "playpen-records" / "grpo+lora" / "tiny-yesno" / "selfplay"
    folders = sorted(p.name for p in records.iterdir() if p.name.startswith("rollout-"))
    assert len(folders) == 4 and sum(f.endswith("-rank1") for f in folders) == 2, folders
    assert len(list(records.rglob("interactions.json"))) == 2 * 8
    # episodes: rank 0's in the run's log, rank 1's in a log of its own; steps once, by rank 0
    log0 = [json.loads(line) for line in (run2 / "playpen-log.jsonl").read_text().splitlines()]
    log1 = [json.loads(line) for line in (run2 / "playpen-log.rank1.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log0 if r["event"] == "train_step"] == [1, 2]
    assert sum(r["event"] == "episode" for r in log0) == sum(r["event"] == "episode" for r in log1) == 8
    assert not [r for r in log1 if r["event"] == "train_step"]
    assert (run2 / "playpen-run.json").exists() and not (run2 / ".playpen.lock").exists()


@pytest.mark.slow
def test_dpo_on_two_processes_shares_collection_and_equals_one_process_on_its_pairs(yes_workspace):
    """Branch pairs are collected by both ranks (each its share of the instances) and
    trained on both; one process trained on the pairs file rank 0 wrote gets the same adapter.
    Prompt sharing is off in both runs: a data-parallel run never shares (one forward per
    backward), and one process sharing a pair's prompt sums in another order, which Adam's
    two steps carry to 5.6e-5 here (sharing alone, same pairs and micro-batches; 0.0 without
    it). That sharing trains the same within its tolerance: tests/test_shared_prefix.py."""
    common = ["run", DPO_TRAINER, "-l", "tiny-yesno", "-T", "1.0", "-L", "3", "--games", "sayword",
              "--max-steps", "2", "--save-steps", "1", "--learning-rate", "3e-3", "--lora-dropout", "0",
              "--no-evaluate", "--share-prompts", "false"]
    two = playpen(yes_workspace, *common, "--pair-instances", "8", "--branches", "4", "--batch-size", "1",
                  "--models-dir", "models-2", "--num-processes", "2")
    assert two.returncode == 0, two.stderr[-4000:]
    run2 = yes_workspace / "models-2" / "dpo+lora" / "tiny-yesno" / "branching-selfplay"
    pairs = run2 / "pairs-round-1.jsonl"
    one = playpen(yes_workspace, *common, "--source", "pairs", "--pairs-file", pairs, "--batch-size", "2",
                  "--models-dir", "models-1")
    assert one.returncode == 0, one.stderr[-4000:]
    assert_same_training(run2, yes_workspace / "models-1" / "dpo+lora" / "tiny-yesno" / "pairs", 2)
    # each rank played its 4 of the 8 instances (4 branches each) into run folders of its own
    records = yes_workspace / "playpen-records" / "dpo+lora" / "tiny-yesno" / "branching-selfplay"
    folders = sorted(p.name for p in records.iterdir() if p.name.startswith("rollout-"))
    assert [f.endswith("-rank1") for f in folders].count(True) == 1 and len(folders) == 2, folders
    games = {f: {e.parent.name.split("_")[1] for e in (records / f).rglob("interactions.json")} for f in folders}
    assert all(len(ids) == 4 for ids in games.values()) and not set.intersection(*games.values()), games
    assert two.stdout.count("preference pairs") == 1  # rank 0 reports the round


def rank_processes(parent: int) -> dict[int, int]:
    """rank -> pid of the processes `parent` (the launching `playpen run`) started."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != parent:
                continue
            env = (stat.parent / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        ranks = [int(v.split(b"=", 1)[1]) for v in env if v.startswith(b"RANK=")]
        if ranks:
            found[ranks[0]] = int(stat.parent.name)
    return found


@pytest.mark.slow
def test_a_rank_that_dies_stops_the_run_in_one_line_and_resume_continues(tiny_workspace):
    import signal
    import time
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    args = [sys.executable, "-m", "playpen", "run", str(SFT_TRAINER), "-l", "tiny-random", "--games",
            "referencegame", "--demo-max-instances", "1", "--max-length", "300", "--batch-size", "1",
            "--save-steps", "2", "--no-evaluate", "--num-processes", "2"]
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    process = subprocess.Popen([*args, "--max-steps", "400"], cwd=tiny_workspace, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 600
        while not training.checkpoints(run_dir) and time.time() < deadline and process.poll() is None:
            time.sleep(0.5)
        ranks = rank_processes(process.pid)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGKILL)  # as the out-of-memory killer would
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGKILL, err[-3000:]
    last = training.latest_checkpoint(run_dir)
    line = err.strip().splitlines()[-1]
    assert line == (f"playpen: error: rank 1 of 2 was killed by SIGKILL (out of memory?), so the run stopped "
                    f"(its output is above); last complete checkpoint: {last.resolve()} (continue with --resume)")
    assert not (run_dir / ".playpen.lock").exists() or not training.FolderLock(run_dir).holder()
    # the run goes on from that checkpoint, on 2 processes again, to 2 steps more
    steps = training.checkpoint_step(last)
    resumed = subprocess.run([*args, "--max-steps", str(steps + 2), "--resume"], cwd=tiny_workspace, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert training.latest_checkpoint(run_dir).name == f"checkpoint-{steps + 2}"


@pytest.mark.slow
def test_both_grpo_examples_run_on_two_processes_and_rank_0_evaluates(toy_workspace):
    """grpo_trainer_lora_mp.py (a programmatic teacher) with --num-processes, and
    grpo_trainer_lora_sp.py through examples/accelerate/ddp.yaml (on this CPU: gloo)."""
    mp = playpen(toy_workspace, "run", "grpo-teacher", "-l", "tiny-random",
                 "-t", "programmatic", "-T", "1.0", "-L", "3", "--games", "relay", "--train-instances", "instances",
                 "--roles", "Listener", "--max-steps", "1", "--num-generations", "2", "--groups-per-step", "2",
                 "--eval-max-instances", "1", "--eval-sets", "none", "--no-eval-static", "--num-processes", "2")
    assert mp.returncode == 0, mp.stderr[-4000:]
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-random" / "programmatic"
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").exists()
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["eval"]["games"][0]["game"] == "relay"  # rank 0 evaluated, once
    assert mp.stdout.count("clemscore table") == 1
    records = toy_workspace / "playpen-records" / "grpo+lora" / "tiny-random" / "programmatic"
    assert sorted(p.name.endswith("-rank1") for p in records.iterdir() if p.name.startswith("rollout-")) \
        == [False, True]
    sp = playpen(toy_workspace, "run", SP_TRAINER, "-l", "tiny-random", "-T", "1.0", "-L", "3", "--games", "relay",
                 "--train-instances", "instances", "--max-steps", "1", "--num-generations", "2",
                 "--groups-per-step", "2", "--no-evaluate", "--num-processes", "2", "--accelerate-config",
                 REPO_ROOT / "examples" / "accelerate" / "ddp.yaml")
    assert sp.returncode == 0, sp.stderr[-4000:]
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-random" / "selfplay"
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").exists()
    only_rank_0_wrote_steps = [json.loads(line)["step"] for line in (run_dir / "playpen-log.jsonl").read_text()
                               .splitlines() if json.loads(line)["event"] == "train_step"]
    assert only_rank_0_wrote_steps == [1]


@pytest.mark.slow
def test_ctrl_c_stops_every_rank_at_one_step_with_a_checkpoint(tiny_workspace):
    import signal
    import time
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    run_dir = tiny_workspace / "models" / "sft+lora" / "tiny-random"
    process = subprocess.Popen(
        [sys.executable, "-m", "playpen", "run", str(SFT_TRAINER), "-l", "tiny-random", "--games", "referencegame",
         "--demo-max-instances", "1", "--max-length", "300", "--batch-size", "1", "--save-steps", "1000",
         "--max-steps", "400", "--no-evaluate", "--num-processes", "2"],
        cwd=tiny_workspace, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        log = run_dir / "playpen-log.jsonl"
        deadline = time.time() + 600
        while not (log.exists() and log.read_text().count("train_step") >= 2) and time.time() < deadline \
                and process.poll() is None:
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends (the ranks run in sessions of their own)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err[-3000:]
    last = training.latest_checkpoint(run_dir)
    assert last is not None and 2 <= training.checkpoint_step(last) < 400  # saved at the step they stopped
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps[-1] == training.checkpoint_step(last)
    assert f"last complete checkpoint: {last.resolve()} (continue with --resume)" in out + err
    assert json.loads((run_dir / "playpen-run.json").read_text())["interrupted"] is True
