"""GRPO trainers over the rollout engine: the tiny-model pipeline learns a trivially
learnable toy game (parameters change, the trained role's expected reward goes up);
groups, per-role rewards, masking, records, the teacher variant, `playpen plot`."""
import json
import math
import shutil
from pathlib import Path

import pytest
from rollout_helpers import p_yes
from click.testing import CliRunner

from playpen import peft_internals
from playpen.cli import cli
from playpen.training.common import lifecycle as training
from playpen.training.grpo import assembly, rollout_bridge

REPO_ROOT = Path(__file__).resolve().parents[1]
SP_TRAINER = "grpo"
MP_TRAINER = "grpo-teacher"
TOYGAMES = REPO_ROOT / "tests" / "toygames"


@pytest.fixture
def toy_workspace(tiny_workspace, yesno_model_dir):
    """tiny_workspace + `tiny-yesno` + the toy games; sayword's instances all ask for "yes"."""
    games = tiny_workspace / "toygames"
    shutil.copytree(TOYGAMES / "sayword", games / "sayword")
    shutil.copytree(TOYGAMES / "relay", games / "relay")
    (games / "sayword" / "in" / "instances.json").write_text(json.dumps({"experiments": [
        {"name": "words", "game_instances": [{"game_id": i, "word": "yes"} for i in range(4)]}]}))
    entries = json.loads((tiny_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-yesno", "huggingface_id": str(yesno_model_dir)})
    (tiny_workspace / "model_registry.json").write_text(json.dumps(entries))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    return tiny_workspace


def load_trainer(path, learner_name, teacher=None, temperature=1.0, max_tokens=3, **config):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class(path)
    learner = load_model_by_name(learner_name, gen_args=dict(temperature=temperature, max_tokens=max_tokens),
                                 role="learner")
    partner = load_model_by_name(teacher, role="teacher") if teacher else None
    return cls(learner, partner, config=cls.config_class(**config), progress=False), learner


# ----------------------------------------------------------------------------- the tiny pipeline

def test_grpo_selfplay_raises_the_toy_reward(toy_workspace):
    from safetensors.torch import load_file
    trainer, learner = load_trainer(SP_TRAINER, "tiny-yesno", games="sayword", train_instances="instances",
                                    max_steps=5, num_generations=16, groups_per_step=1, learning_rate=3e-3,
                                    lora_r=8, beta=0.0, reward="binary", save_steps=100, eval_max_instances=1,
                                    eval_sets="none", eval_static=False)
    before = p_yes(learner.model, learner.tokenizer)
    trainer.learn(None)
    after = p_yes(learner.model, learner.tokenizer)  # the learner now carries the trained adapter
    assert after > before + 0.02, (before, after)

    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-yesno" / "selfplay"
    ckpt = training.latest_checkpoint(run_dir)
    assert ckpt.name == "checkpoint-5"
    weights = load_file(ckpt / "adapter_model.safetensors")
    assert any(w.abs().sum() > 0 for n, w in weights.items() if "lora_B" in n), "adapter unchanged"
    log = [json.loads(l) for l in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r["event"] == "train_step"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]
    for key in ("reward/WordSayer/mean", "reward/WordSayer/std", "rollout/percent_played",
                "rollout/reward_mean", "train/loss", "rollout/tokens_per_s", "rollout/episodes",
                "rollout/aborted_rate", "rollout/turns_mean"):
        assert key in steps[0], key
    # every rollout after the first came from weights the previous step changed
    assert [s["rollout/adapter_changed"] for s in steps[1:]] == [1.0] * 4 and "rollout/adapter_changed" not in steps[0]
    assert all(s["rollout/episodes"] == 16 for s in steps)
    assert sum(r["event"] == "episode" for r in log) == 5 * 16
    # every finished episode is on disk in clemcore's layout
    records = toy_workspace / "playpen-records" / "grpo+lora" / "tiny-yesno" / "selfplay"
    assert len(list(records.rglob("interactions.json"))) == 5 * 16
    assert (run_dir / "learning-curve.png").exists()
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["eval"]["games"][0]["game"] == "sayword"


def test_rollout_func_rows_groups_and_masks(toy_workspace):
    """Self-play on a 2-role game: each (instance, role) slot gets num_generations rows of
    that role, both roles share the instance's episodes, partner/GM tokens are masked."""
    from playpen.models import load_model_by_name
    from playpen.rollouts import SamplingConfig
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=4), role="learner")
    per_instance, roles = rollout_bridge.training_slots(["relay"], instances="instances")
    assert roles == {"relay": ["Speaker", "Listener"]}
    assert [s.role for s in per_instance[0]] == ["Speaker", "Listener"]
    slots = per_instance[0] + per_instance[1]
    group = 3
    prompts = [s.to_prompt() for s in slots for _ in range(group)]
    func = rollout_bridge.GameRollout("tiny-random", learner.tokenizer, num_generations=group, game_roles=roles,
                            sampling=SamplingConfig(temperature=1.0, max_new_tokens=4), records_dir=None,
                            instances="instances")

    class FakeTrainer:
        model = learner.model
        state = type("S", (), {"global_step": 0})()

    out = func(prompts, FakeTrainer())
    assert len(out["prompt_ids"]) == len(prompts) == 12
    assert out["role"] == [s.role for s in slots for _ in range(group)]
    assert func.last_metrics["rollout/episodes"] == 2 * group  # shared by both roles, not 4 * group
    for ids, mask, logprobs, reward in zip(out["completion_ids"], out["env_mask"], out["logprobs"],
                                           out["reward"]):
        assert len(ids) == len(mask) == len(logprobs)
        # a role that never got a turn (the episode aborted before it) has nothing to train
        assert sum(mask) > 0 or math.isnan(reward)
    assert any(sum(mask) > 0 for mask in out["env_mask"])
    funcs, weights = rollout_bridge.reward_functions(["Speaker", "Listener"])
    speaker = funcs[0](prompts, None, reward=out["reward"], role=out["role"])
    assert all((v is None) == (r != "Speaker") for v, r in zip(speaker, out["role"]))
    assert weights == [1.0, 1.0, 0.0] and funcs[-1].__name__ == "played"


def test_slot_dataset_keeps_an_instances_roles_together():
    per_instance = [[rollout_bridge.Slot("g", "e", i, r) for r in ("A", "B")] for i in range(3)]
    dataset = rollout_bridge.slot_dataset(per_instance, 10, seed=1)
    slots = [rollout_bridge.Slot.from_prompt(p) for p in dataset["prompt"]]
    assert len(slots) >= 10
    assert all(slots[i].instance == slots[i + 1].instance and (slots[i].role, slots[i + 1].role) == ("A", "B")
               for i in range(0, len(slots), 2))


def test_grpo_with_teacher_via_playpen_run(toy_workspace):
    result = CliRunner().invoke(cli, ["run", str(MP_TRAINER), "-l", "tiny-random", "-t", "programmatic",
                                      "-T", "1.0", "-L", "3", "--games", "relay", "--train-instances",
                                      "instances", "--roles", "Listener", "--max-steps", "1",
                                      "--num-generations", "2", "--groups-per-step", "1", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-random" / "programmatic"
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").exists()
    step = json.loads((run_dir / "playpen-log.jsonl").read_text().splitlines()[-1])
    assert "reward/Listener/mean" in step and "reward/Speaker/mean" not in step
    episodes = list((toy_workspace / "playpen-records" / "grpo+lora" / "tiny-random" / "programmatic")
                    .rglob("interactions.json"))
    assert len(episodes) == 2
    players = json.loads(episodes[0].read_text())["players"]
    assert players["Player 1"]["model_name"] == "programmatic"
    assert players["Player 2"]["model_name"] == "tiny-random"


@pytest.mark.parametrize("trainer, args, expected", [
    (MP_TRAINER, [], "this trainer needs a teacher"),
    (SP_TRAINER, ["--roles", "Speeker"], "unknown role 'Speeker'. Did you mean: Speaker?"),
    (SP_TRAINER, ["--reward", "dense"], "--reward must be outcome or binary"),
    (SP_TRAINER, ["--lora-dropout", "1.5"], "option --lora-dropout: 1.5 is not valid; expected a number in [0, 1)"),
    # every option is checked before a model loads (a step count of 0 once meant 3 epochs)
    (SP_TRAINER, ["--max-steps", "0"], "option --max-steps: 0 is not valid; expected an integer >= 1"),
    (SP_TRAINER, ["--learning-rate", "-1"], "option --learning-rate: -1.0 is not valid; expected a number >= 0"),
    (SP_TRAINER, ["--report-to", "foo"], "option --report-to: 'foo' is not valid; expected none or"),
    (SP_TRAINER, ["--num-generations", "1"], "option --num-generations: 1 is not valid"),
    (SP_TRAINER, ["--resume", "--overwrite"], "--resume and --overwrite exclude each other"),
    (SP_TRAINER, ["--games", "relay", "--train-instances", "nope"], "has no in/nope.json"),
])
def test_grpo_user_errors(toy_workspace, trainer, args, expected):
    base = ["--games", "relay", "--train-instances", "instances"]
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", *base, *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_set_lora_dropout_replaces_every_lora_dropout(tiny_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM"))

    def dropouts():
        return [d for m in model.modules() if isinstance(getattr(m, "lora_dropout", None), torch.nn.ModuleDict)
                for d in m.lora_dropout.values()]
    layers = len(dropouts())
    assert layers > 0 and all(isinstance(d, torch.nn.Dropout) and d.p == 0.05 for d in dropouts())
    assert peft_internals.set_lora_dropout(model, 0.0) == layers
    assert all(isinstance(d, torch.nn.Identity) for d in dropouts())
    assert peft_internals.set_lora_dropout(model, 0.2) == layers
    assert all(isinstance(d, torch.nn.Dropout) and d.p == 0.2 for d in dropouts())
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        peft_internals.set_lora_dropout(model, 1.0)


def test_grpo_from_an_adapter_trains_without_its_dropout(toy_workspace, tiny_model_dir, tmp_path, monkeypatch):
    """--init-adapter: the SFT adapter's dropout (0.05 here) is replaced by --lora-dropout (0)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    adapter = tmp_path / "sft-adapter"
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                   LoraConfig(r=4, lora_dropout=0.05, target_modules="all-linear",
                              task_type="CAUSAL_LM")).save_pretrained(adapter)
    seen = {}
    original = peft_internals.set_lora_dropout

    def spy(model, p):
        seen["p"], seen["changed"] = p, original(model, p)
        return seen["changed"]
    monkeypatch.setattr(assembly, "set_lora_dropout", spy)
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "-L", "3", "--games", "sayword",
                                      "--train-instances", "instances", "--max-steps", "1", "--no-evaluate",
                                      "--num-generations", "2", "--init-adapter", str(adapter)])
    assert result.exit_code == 0, result.output
    assert seen["p"] == 0.0 and seen["changed"] > 0


# ----------------------------------------------------------------------------- plot

def test_plot_command(tmp_path):
    log = tmp_path / "run" / "playpen-log.jsonl"
    log.parent.mkdir()
    lines = [{"event": "train_step", "step": s, "rollout/reward_mean": s / 10, "reward/A/mean": s / 5,
              "rollout/percent_played": 50 + s, "train/loss": 1 / s} for s in range(1, 6)]
    lines.insert(2, {"event": "episode", "outcome": "success"})
    log.write_text("\n".join(json.dumps(l) for l in lines) + '\n{"event": "train_st')  # cut by a crash
    result = CliRunner().invoke(cli, ["plot", str(log.parent)])
    assert result.exit_code == 0, result.output
    png = log.parent / "learning-curve.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    missing = CliRunner().invoke(cli, ["plot", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no training log" in missing.output


def test_steps_without_signal_skip_their_passes(toy_workspace):
    """A random model never says the word: every episode scores alike, every advantage is 0.
    With beta 0 the loss and its gradients are exactly 0, so the rows' forward and backward
    passes are skipped (counted in train/no_signal_rows) and the adapter stays as it was; with
    a KL term they still run."""
    from safetensors.torch import load_file
    for beta, skipped in ((0.0, True), (0.02, False)):
        trainer, _ = load_trainer(SP_TRAINER, "tiny-random", games="sayword", train_instances="instances",
                                  max_steps=2, num_generations=4, groups_per_step=2, micro_batch_size=4,
                                  beta=beta, reward="binary", save_steps=100, evaluate=False,
                                  models_dir=str(toy_workspace / f"models-{beta}"))
        trainer.learn(None)
        run_dir = toy_workspace / f"models-{beta}" / "grpo+lora" / "tiny-random" / "selfplay"
        steps = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
        steps = [s for s in steps if s["event"] == "train_step"]
        assert len(steps) == 2 and all(s["reward/WordSayer/std"] == 0.0 for s in steps)
        assert [s["train/no_signal_rows"] for s in steps] == ([8, 8] if skipped else [0, 0])
        if skipped:
            assert all(s["time/forward_s"] < 0.05 and s["train/loss"] == 0.0 for s in steps)
            weights = load_file(training.latest_checkpoint(run_dir) / "adapter_model.safetensors")
            assert all(float(w.abs().sum()) == 0.0 for n, w in weights.items() if "lora_B" in n)


# ----------------------------------------------------------------------------- the run's health

def test_a_run_without_signal_saves_and_stops(toy_workspace, capsys):
    """A random model never says the word: every group scores alike. With --stop-without-signal 2
    the run saves and stops after its second step, says why in one line, and its end-of-run
    evaluation still runs; with 0 it trains on to --max-steps."""
    for stop, steps_run in ((2, 2), (0, 3)):
        models = toy_workspace / f"models-stop{stop}"
        trainer, _ = load_trainer(SP_TRAINER, "tiny-random", games="sayword", train_instances="instances",
                                  max_steps=3, num_generations=4, groups_per_step=1, beta=0.0, reward="binary",
                                  save_steps=100, evaluate=False, stop_without_signal=stop, models_dir=str(models))
        trainer.learn(None)
        run_dir = models / "grpo+lora" / "tiny-random" / "selfplay"
        log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
        assert [r["step"] for r in log if r["event"] == "train_step"] == list(range(1, steps_run + 1))
        assert training.latest_checkpoint(run_dir).name == f"checkpoint-{steps_run}"
        said = [line for line in capsys.readouterr().out.splitlines() if "stopping at step" in line]
        assert len(said) == (1 if stop else 0)
        if stop:
            assert said[0].startswith("[playpen] stopping at step 2: 2 steps in a row had no learning signal")
    with pytest.raises(Exception, match="stop-without-signal"):
        load_trainer(SP_TRAINER, "tiny-random", games="sayword", stop_without_signal=-1)


def test_the_policy_watch_says_once_when_the_generating_weights_stop_changing():
    import torch
    from playpen.training.grpo.watch import PolicyWatch, rollout_health
    layer = torch.nn.Linear(3, 2)
    said = []
    watch = PolicyWatch(learning_rate=1e-4, stale_steps=2, echo=said.append)
    assert watch.check(layer, 0) == {}  # the first rollout has nothing to compare with
    with torch.no_grad():
        layer.weight.add_(1e-3)
    assert watch.check(layer, 1) == {"rollout/adapter_changed": 1.0}
    assert [watch.check(layer, s)["rollout/adapter_changed"] for s in (2, 3, 4)] == [0.0, 0.0, 0.0]
    assert len(said) == 1 and "generated with the same weights" in said[0] and "0.0001" in said[0]
    quiet = PolicyWatch(learning_rate=0.0, stale_steps=1, echo=said.append)  # a null update: expected
    quiet.check(layer, 0), quiet.check(layer, 1), quiet.check(layer, 2)
    assert len(said) == 1
    assert rollout_health(["success", "aborted", "failure", "aborted"], [2, 1, 3, 2]) == \
        {"rollout/aborted_rate": 0.5, "rollout/turns_mean": 2.0}


def test_under_vllm_the_policy_watch_checks_the_adapter_versions_vllm_was_handed(tiny_pair, monkeypatch):
    """--engine vllm: the check reads the folder of the version the rollout's requests named
    (playpen's real Adapters; a backend that only records), not the trainer's weights; changed
    weights count only under a new id, and changed weights under a reused id are a defect."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file
    from playpen.inference import vllm_engine
    from playpen.rollouts import SamplingConfig
    from playpen.training.grpo.watch import PolicyWatch

    class Recorded:  # vllm_engine.Backend's adapter half: what vLLM was told
        def __init__(self):
            self.loaded = []

        def load(self, adapter):
            self.loaded.append(adapter)

        def unload(self, adapter):
            pass

    model = get_peft_model(tiny_pair[0], LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    adapters = vllm_engine.Adapters(Recorded(), folder=None)
    monkeypatch.setitem(vllm_engine._BACKENDS, ("local", "watched"), (adapters.backend, adapters))
    said = []
    watch = PolicyWatch(1e-4, stale_steps=2, echo=said.append, sampling=SamplingConfig(engine="vllm"))

    def step():  # what an optimizer step does to the trained adapter
        with torch.no_grad():
            next(p for n, p in model.named_parameters() if "lora_B" in n).add_(1e-2)

    try:
        first = adapters.serve(model, None)  # a rollout: the door hands the active adapter over
        assert watch.check(model, 0) == {}
        step()
        second = adapters.serve(model, None)
        assert second.id != first.id and second.path != first.path  # new weights: a new id and folder, always
        assert watch.check(model, 1) == {"rollout/adapter_changed": 1.0}
        assert adapters.serve(model, None) == second and watch.check(model, 2) == {"rollout/adapter_changed": 0.0}
        step()  # the trainer changed, but this rollout never handed the change over: vLLM's copy is old
        assert watch.check(model, 3) == {"rollout/adapter_changed": 0.0}
        assert len(said) == 1 and "generated with the same weights" in said[0]
        # the stale-weights bug: new weights written into the served folder under its old id
        file = Path(second.path) / "adapter_model.safetensors"
        save_file({name: t + 1 for name, t in load_file(file).items()}, file)
        assert watch.check(model, 4) == {"rollout/adapter_changed": 0.0}
        assert said[-1].startswith("[playpen] defect: step 4's rollout named adapter(s) default under the id")
        assert [a.id for a in adapters.backend.loaded] == [first.id, second.id]
        # a second process's first version has the same id: a server (keyed by name) must still tell them apart
        other = vllm_engine.Adapters(Recorded(), folder=None)
        try:
            assert other.serve(model, None).id == first.id and other.serve(model, None).name != first.name
        finally:
            other.close()
    finally:
        adapters.close()


def test_the_progress_bar_shows_the_runs_health(capsys):
    """The training bar's last line, fed step lines made as the trainers make them (TRL's log
    renamed, then playpen's rollout metrics): GRPO's loss, reward, share of groups without
    signal, aborted share, turns, KL and adapter check; expert iteration's no-win share; a
    metric a step does not log (expert iteration's reward and KL) is simply not on the bar."""
    import torch
    from playpen.callbacks import ProgressCallback
    from playpen.training.common.trainer_callback import rename_metrics
    from playpen.training.grpo.advantages import Advantages
    from playpen.training.grpo.watch import PolicyWatch, rollout_health
    layer = torch.nn.Linear(2, 1)
    watch = PolicyWatch(learning_rate=1e-4, echo=print)
    watch.check(layer, 0)
    with torch.no_grad():
        layer.bias.add_(0.5)
    advantages = Advantages("group", group_size=2, echo=print)
    advantages.compute([1.0, 0.0, 0.0, 0.0], ["Guesser"] * 4, ["taboo"] * 4)  # the second group: no signal
    trl_log = {"loss": -0.09480186, "grad_norm": 1.4657, "learning_rate": 2e-4, "reward": -0.33333334,
               "kl": 0.0016559, "rewards/role:Guesser/mean": 0.4, "entropy": 3.597}
    grpo_step = {**rename_metrics(trl_log), **advantages.metrics, **watch.check(layer, 1),
                 **rollout_health(["success", "aborted", "failure", "aborted"], [3, 1, 2, 3])}

    def last_line(step_metrics):
        bar = ProgressCallback()
        bar.on_learn_start("run", 2)
        bar.on_train_step(1, step_metrics)
        bar.on_learn_end()  # closing draws the bar's final state
        return capsys.readouterr().err.strip().split("\r")[-1]

    assert last_line(grpo_step).endswith(
        "loss=-0.0948, reward=-0.333, no_signal=0.5, aborted=0.5, turns=2.25, kl=0.00166, changed=1]")
    sft_log = {"loss": 1.25, "grad_norm": 3.1, "learning_rate": 1e-4, "mean_token_accuracy": 0.5, "num_tokens": 96.0}
    expert_step = {**rename_metrics(sft_log), "expert/round": 2, "expert/win_rate": 12.5, "expert/no_win_groups": 75.0,
                   **rollout_health(["failure", "success"], [4, 2]), **watch.check(layer, 2)}
    assert last_line(expert_step).endswith("loss=1.25, no_win%=75, aborted=0, turns=3, changed=0]")
    bare = last_line({"train/grad_norm": 1.0})  # nothing the bar shows: no postfix at all
    assert bare.startswith("run steps:") and bare.endswith("]") and "=" not in bare


def test_a_run_whose_weights_never_change_is_named_in_one_line_and_stops(tmp_path, capsys):
    """``--stop-without-signal 2``: groups that carry signal, yet the rollouts of steps 2 to 4
    come from the same weights (the updates miss the generating model). The trainer callback asks
    :func:`stop_reason` after each logged step: quiet while the weights moved, then one line
    naming the unchanged weights, and the run saves and stops. At learning rate 0 unchanged
    weights are expected: no stop."""
    import torch
    from transformers import TrainerControl, TrainerState
    from playpen.callbacks import CallbackList
    from playpen.training.common.trainer_callback import make_trainer_callback
    from playpen.training.grpo.advantages import Advantages
    from playpen.training.grpo.watch import PolicyWatch, stop_reason
    layer = torch.nn.Linear(2, 1)
    for learning_rate, stops_at in ((1e-4, 4), (0.0, None)):
        advantages = Advantages("group", group_size=2, echo=print)
        watch = PolicyWatch(learning_rate, echo=print)
        callback = make_trainer_callback(CallbackList(), tmp_path / str(learning_rate),
                                         stop_when=lambda: stop_reason(2, advantages, watch))
        stopped = None
        for step in range(1, 5):
            advantages.compute([1.0, 0.0], ["Guesser"] * 2, ["taboo"] * 2)  # signal in every step
            watch.check(layer, step)
            if step == 1:
                with torch.no_grad():
                    layer.weight.add_(1e-3)  # the only update that reaches the generating weights
            control = TrainerControl()
            callback.on_log(None, TrainerState(global_step=step), control, logs={"loss": 0.5})
            if control.should_training_stop:
                stopped = step
                break
        said = [line for line in capsys.readouterr().out.splitlines() if "stopping at step" in line]
        assert stopped == stops_at and len(said) == (1 if stops_at else 0)
        if stops_at:
            assert control.should_save and said[0] == (
                "[playpen] stopping at step 4: the rollouts of 3 steps in a row came from unchanged weights "
                "although the learning rate is 0.0001: the updates are 0 or miss the generating model "
                "(--stop-without-signal 0 trains on regardless)")
    assert stop_reason(0, advantages, PolicyWatch(1e-4)) is None  # 0: never stop
