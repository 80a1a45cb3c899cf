"""``--engine vllm`` reaches vLLM in every trainer that generates beyond GRPO and expert
iteration (tests/test_vllm_engine.py): SPIN, self-rewarding (the learner judging itself
too), DPO from branches, SPAG, fictitious self-play and hierarchical GRPO. Each runs its
smallest run through ``playpen run``; vLLM must have answered its requests, and the run must
have trained. One vLLM engine serves the whole module (one model folder, one dtype: its
start-up is the cost, ~25 s on 2 cores); the model is the tiny vLLM model taught relay's
Speaker and the judge (rollout_helpers.teach_speaker_and_judge), so branches and candidates
differ and the judge gives scores. GRPO with a teacher checks that each step's rollout came from
the adapter version the previous step trained, as vLLM was handed it."""
import json
import shutil

import pytest

pytest.importorskip("vllm")

from click.testing import CliRunner  # noqa: E402
from conftest import GAMES_DIR, tiny_registry_entry  # noqa: E402
from rollout_helpers import JUDGE_TEMPLATE, TOYGAMES_DIR, teach_speaker_and_judge  # noqa: E402
from vllm_helpers import make_vllm_model, requests_answered, small_kv_cache  # noqa: E402,F401 (autouse)

from playpen.cli import cli  # noqa: E402
from playpen.inference import vllm_engine  # noqa: E402

# float32 everywhere: greedy and sampled runs then share one engine (auto would pick bf16 for sampled turns)
VLLM = ["--engine", "vllm", "--engine-dtype", "float32"]
RELAY = ["--games", "relay", "--train-instances", "instances_train"]


@pytest.fixture(scope="module")
def taught_dir(tmp_path_factory):
    return teach_speaker_and_judge(make_vllm_model(tmp_path_factory.mktemp("tiny-vllm")),
                                   tmp_path_factory.mktemp("tiny-vllm-taught"))


@pytest.fixture
def workspace(tmp_path, monkeypatch, taught_dir):
    """cwd with `tiny-random` (the taught model), playpen's games and the toy relay whose
    training instances all say 'apple', and JUDGE_TEMPLATE in judge.jinja."""
    games = tmp_path / "toygames"
    shutil.copytree(TOYGAMES_DIR / "relay", games / "relay")
    (games / "relay" / "in" / "instances_train.json").write_text(json.dumps({"experiments": [
        {"name": "short", "max_rounds": 2, "game_instances": [{"game_id": i, "word": "apple"} for i in range(2)]}]}))
    (tmp_path / "model_registry.json").write_text(json.dumps([tiny_registry_entry(taught_dir)]))
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)},
                                                             {"benchmark_path": str(GAMES_DIR)}]))
    (tmp_path / "judge.jinja").write_text(JUDGE_TEMPLATE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def served_prompts(monkeypatch):
    """Every prompt (token ids) the in-process vLLM engine answers from now on: its real
    ``complete``, recorded."""
    seen = []
    complete = vllm_engine.InProcess.complete

    def recorded(self, prompts, *args):
        seen.extend(list(p) for p in prompts)
        return complete(self, prompts, *args)

    monkeypatch.setattr(vllm_engine.InProcess, "complete", recorded)
    return seen


def run(*args):
    answered = requests_answered()
    result = CliRunner().invoke(cli, ["run", *args, *VLLM])
    assert result.exit_code == 0, result.output[-3000:]
    assert requests_answered() > answered, "vLLM answered nothing"
    return result


def adapter_trained(checkpoint) -> bool:
    """A LoRA checkpoint whose B matrices moved from their zero start."""
    from safetensors.torch import load_file
    weights = load_file(checkpoint / "adapter_model.safetensors")
    return any(w.abs().sum() > 0 for n, w in weights.items() if "lora_B" in n)


def test_spin_answers_its_demonstration_turns_with_vllm(workspace):
    run("spin", "-l", "tiny-random", "-L", "6", *RELAY, "--rounds", "1", "--max-steps", "1", "--pairs-per-round", "2",
        "--batch-size", "2", "--learning-rate", "1e-3", "--no-evaluate")
    assert adapter_trained(workspace / "models" / "spin+lora" / "tiny-random" / "checkpoint-1")


def test_self_rewarding_samples_candidates_and_judges_them_with_vllm(workspace, taught_dir, served_prompts):
    """The learner judges itself through vLLM as well: its judge prompts are among vLLM's."""
    from transformers import AutoTokenizer
    run("self-rewarding", "-l", "tiny-random", "-t", "programmatic", "-T", "1.0", "-L", "6", *RELAY,
        "--roles", "Speaker", "--judge", "learner", "--judge-template", "judge.jinja", "--candidates", "4",
        "--pair-instances", "2", "--rounds", "1", "--max-steps", "1", "--judge-max-tokens", "8", "--batch-size", "2",
        "--learning-rate", "1e-3", "--no-evaluate")
    run_dir = workspace / "models" / "self-rewarding+lora" / "tiny-random" / "judge-learner-programmatic"
    assert adapter_trained(run_dir / "checkpoint-1")
    texts = [AutoTokenizer.from_pretrained(taught_dir).decode(p) for p in served_prompts]
    assert any("JUDGE-PROMPT-MARKER" in t for t in texts) and any("secret word 'apple'" in t for t in texts)


def test_dpo_from_branches_plays_its_branches_with_vllm(workspace):
    run("dpo", "-l", "tiny-random", "-t", "programmatic", "-T", "1.0", "-L", "6", *RELAY, "--roles", "Speaker",
        "--branches", "4", "--pair-instances", "2", "--max-steps", "1", "--batch-size", "2", "--learning-rate", "1e-3",
        "--no-evaluate")
    assert adapter_trained(workspace / "models" / "dpo+lora" / "tiny-random" / "branching-programmatic" / "checkpoint-1")


def test_spag_plays_its_self_play_epoch_with_vllm(workspace):
    run("spag", "-l", "tiny-random", "-T", "1.0", "-L", "6", "--imitation-steps", "0", "--epochs", "1",
        "--max-steps", "1", "--episodes-per-epoch", "2", "--batch-size", "2", "--learning-rate", "1e-2",
        "--no-winners-only", "--max-length", "800", "--no-evaluate")
    assert adapter_trained(workspace / "models" / "spag+lora" / "tiny-random" / "checkpoint-1")


def test_fictitious_self_play_plays_its_matches_with_vllm(workspace):
    run("fsp", "-l", "tiny-random", "-T", "1.0", "-L", "4", "--games", "relay", "--train-instances", "instances",
        "--epochs", "1", "--matches-per-epoch", "1", "--num-generations", "2", "--lora-r", "4")
    run_dir = workspace / "models" / "fsp+lora" / "tiny-random"
    assert [p.name for p in run_dir.glob("checkpoint-*")] == ["checkpoint-1"]
    assert (run_dir / "population" / "adapters" / "learner-0" / "adapter_config.json").is_file()


def test_grpo_rollouts_come_from_each_steps_adapter_as_vllm_was_handed_it(workspace):
    """The adapter check under vLLM (issue 39 §3) reads the folder and id vLLM was handed
    (playpen.training.grpo.watch): the taught Speaker wins about half its episodes, so step 1
    trains and step 2's rollout must have been served the new weights under a new id."""
    run("grpo-teacher", "-l", "tiny-random", "-t", "programmatic", "-T", "1.0", "-L", "6", *RELAY, "--roles", "Speaker",
        "--max-steps", "2", "--num-generations", "8", "--learning-rate", "1e-3", "--no-evaluate", "--save-steps", "100")
    log = next(workspace.rglob("playpen-log.jsonl")).read_text().splitlines()
    steps = [s for s in map(json.loads, log) if s["event"] == "train_step"]
    assert steps[0]["train/frac_reward_zero_std"] < 1  # step 1 had signal: it changed the adapter
    assert "rollout/adapter_changed" not in steps[0] and steps[1]["rollout/adapter_changed"] == 1.0


def test_hierarchical_grpo_plays_proposers_and_solvers_with_vllm(workspace):
    run("hierarchical-grpo", "-l", "tiny-random", "-L", "3", "--max-steps", "1", "--num-generations", "2",
        "--no-evaluate", "--save-steps", "1", "--beta", "0")
    run_dir = workspace / "models" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").is_file()
    step = next(s for s in map(json.loads, (run_dir / "playpen-log.jsonl").read_text().splitlines())
                if "train/loss" in s)
    assert step["advantage/0/Proposer/num"] == 2 and step["advantage/1/Solver/num"] == 4
