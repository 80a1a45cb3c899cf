"""A null update must reproduce its start: every trainer family's whole path (train -> save ->
load -> evaluate) at learning rate 0, started from an adapter, leaves that adapter's weights
and its greedy episodes unchanged, item for item.

Why: the learning protocol found every interaction trainer ending below the adapter it
started from. Before any of that is read as learning, the path itself must be neutral: an
adapter lost or replaced on loading, saved under other keys, a second adapter saved in its
place, dropout left on at evaluation, or a prompt rendered differently would each show up
here as a changed episode. The start adapter is random and non-zero (with LoRA dropout), so
its episodes differ from the base model's: a path that dropped it would fail.
"""
import json
from pathlib import Path

import pytest
from test_grpo import toy_workspace  # noqa: F401  (the fixture: sayword asking "yes", relay, tiny-yesno)

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES_DIR = REPO_ROOT / "playpen" / "games"
EXAMPLES = REPO_ROOT / "examples" / "trl"
# the evaluation every check below repeats: greedy, the games' own instances file
GREEDY = dict(temperature=0.0, max_tokens=4)


def make_start_adapter(model_dir, out: Path, *, seed: int = 1) -> Path:
    """A LoRA adapter on every linear layer (dropout 0.1, so an evaluation left in training
    mode would sample other tokens), random A and B, then a few plain-torch steps towards
    answering "yes": its greedy sayword reply is "yes" where the base model's is "no", and
    sampling still gives both answers (expert iteration finds won episodes to keep)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from rollout_helpers import PROMPT, p_yes
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                          LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules="all-linear",
                                     init_lora_weights=False, task_type="CAUSAL_LM"))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                           tokenize=False)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([tokenizer(prompt + "yes<|im_end|>", add_special_tokens=False)["input_ids"]])
    labels = ids.clone()
    labels[:, :start] = -100
    optimizer = torch.optim.Adam([p for p in peft.parameters() if p.requires_grad], lr=1e-2)
    peft.eval()  # no dropout while making it: a deterministic start
    for _ in range(100):  # ~12 steps
        if p_yes(peft, tokenizer) > 0.7:
            break
        peft(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert p_yes(peft, tokenizer) > 0.7
    peft.save_pretrained(out)
    return out


def adapter_weights(folder: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(Path(folder) / "adapter_model.safetensors")


def episodes(adapter, label: str, games: list[str], learner: str = "tiny-yesno",
             partner: str | None = None) -> dict:
    """Every greedy episode of `games` on their held-out instances: item -> the turns' texts."""
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    model = load_model_by_name(learner, gen_args=GREEDY, role="learner", adapter=adapter, run_name=label)
    players = [model] if partner is None else [model, load_model_by_name(partner, gen_args=GREEDY, role="partner")]
    table = evaluate(players, games, results_dir=Path("null-results"), run_name=label, batch_size=4)
    out = {}
    for path in sorted(Path(table.run_dir).rglob("interactions.json")):
        turns = json.loads(path.read_text())["turns"]
        out[str(path.parent.relative_to(table.run_dir))] = [
            str(event["action"].get("content")) for turn in turns for event in turn]
    assert out, f"no episodes under {table.run_dir}"
    return out


def run_trainer(file: str, learner: str = "tiny-yesno", teacher: str | None = None, **config):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class(EXAMPLES / file)
    model = load_model_by_name(learner, gen_args=dict(temperature=1.0, max_tokens=4), role="learner")
    partner = load_model_by_name(teacher, role="teacher") if teacher else None
    trainer = cls(model, partner, config=cls.config_class(**config), progress=False)
    trainer.learn(None)
    return model


def last_checkpoint(run_dir: Path) -> Path:
    from playpen.training.common.checkpoints import latest_checkpoint
    checkpoint = latest_checkpoint(run_dir)
    assert checkpoint is not None, f"no checkpoint in {run_dir}"
    return checkpoint


def assert_null_update(start: Path, after: Path, games, partner=None) -> None:
    """`after` holds `start`'s weights under the same names, and plays `start`'s episodes."""
    import torch
    before, now = adapter_weights(start), adapter_weights(after)
    assert sorted(now) == sorted(before), "the saved adapter's tensors are not the start adapter's"
    changed = [name for name in before if not torch.equal(before[name], now[name])]
    assert not changed, f"a learning rate of 0 changed {len(changed)} tensors, e.g. {changed[:3]}"
    expected = episodes(start, "start", games, partner=partner)
    assert episodes(None, "base", games, partner=partner) != expected, "the start adapter changes nothing"
    assert episodes(after, "after", games, partner=partner) == expected


COMMON = dict(learning_rate=0.0, save_steps=100, evaluate=False)


@pytest.fixture
def start(toy_workspace, yesno_model_dir):
    return make_start_adapter(yesno_model_dir, toy_workspace / "start-adapter")


def test_sft_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    # demonstrations: the programmatic player's won sayword episodes on the training instances
    run_trainer("sft_trainer_lora.py", games="sayword", train_instances="instances", init_adapter=str(start),
                max_steps=2, batch_size=2, **COMMON)
    after = last_checkpoint(toy_workspace / "models" / "sft+lora" / "tiny-yesno")
    assert_null_update(start, after, ["sayword"])


def test_expert_iteration_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    run_trainer("expert_iteration_trainer_lora.py", games="sayword", train_instances="instances", rounds=2,
                max_steps=2, instances_per_round=0, samples_per_instance=4, batch_size=2,
                init_adapter=str(start), **COMMON)
    after = last_checkpoint(toy_workspace / "models" / "expert-iteration+lora" / "tiny-yesno")
    assert_null_update(start, after, ["sayword"])


def test_grpo_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    run_trainer("grpo_trainer_lora_sp.py", games="sayword", train_instances="instances", max_steps=2,
                num_generations=4, groups_per_step=1, reward="binary", beta=0.02, init_adapter=str(start), **COMMON)
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-yesno" / "selfplay"
    assert_null_update(start, last_checkpoint(run_dir), ["sayword"])
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert [r.get("rollout/adapter_changed") for r in log if r["event"] == "train_step"] == [None, 0.0]


def test_spin_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    # SPIN is DPO in rounds: the demonstration's turn chosen, the learner's own rejected
    run_trainer("spin_trainer_lora.py", games="sayword", train_instances="instances", rounds=1, pairs_per_round=2,
                batch_size=2, max_steps=2, init_adapter=str(start), **COMMON)
    after = last_checkpoint(toy_workspace / "models" / "spin+lora" / "tiny-yesno")
    assert_null_update(start, after, ["sayword"])


def test_dpo_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    # plain DPO on a pairs file (sayword's prompt, "yes" over "no"): the reference is a frozen
    # copy of the start adapter beside the trained one, and only the trained one may be saved
    from playpen.pairs import PreferencePair, write_pairs
    from rollout_helpers import PROMPT
    pairs = write_pairs([PreferencePair(({"role": "user", "content": PROMPT},), "yes", "no")] * 2,
                        toy_workspace / "pairs.jsonl")
    run_trainer("dpo_trainer_lora.py", games="sayword", source="pairs", pairs_file=str(pairs), batch_size=2,
                max_steps=2, init_adapter=str(start), **COMMON)
    after = last_checkpoint(toy_workspace / "models" / "dpo+lora" / "tiny-yesno" / "pairs")
    assert_null_update(start, after, ["sayword"])


def test_spag_at_learning_rate_zero_reproduces_its_start(toy_workspace, start):
    # adversarial_taboo: playpen's own games beside the toy ones
    registry = toy_workspace / "game_registry.json"
    registry.write_text(json.dumps([*json.loads(registry.read_text()), {"benchmark_path": str(GAMES_DIR)}]))
    run_trainer("spag_trainer_lora.py", imitation_steps=1, max_steps=1, epochs=1, episodes_per_epoch=2,
                demo_max_instances=1, batch_size=2, winners_only=False, init_adapter=str(start), **COMMON)
    after = last_checkpoint(toy_workspace / "models" / "spag+lora" / "tiny-yesno")
    assert_null_update(start, after, ["sayword"])


def test_a_population_at_learning_rate_zero_keeps_its_players_start(toy_workspace, start):
    run_trainer("fsp_trainer_lora.py", games="relay", train_instances="instances", epochs=1, matches_per_epoch=1,
                num_generations=2, init_adapter=str(start), learning_rate=0.0)
    adapters = toy_workspace / "models" / "fsp+lora" / "tiny-yesno" / "population" / "adapters"
    trained = sorted(p for p in adapters.iterdir() if (p / "adapter_model.safetensors").exists())
    assert trained, f"no player adapters under {adapters}"
    assert_null_update(start, trained[-1], ["sayword"])


def test_a_run_reports_its_start_adapter_as_before(toy_workspace, start, capsys):
    """With --init-adapter the end-of-run table compares with the start adapter, not the
    base model: a run that ends below its start says so. At learning rate 0 nothing changes."""
    run_trainer("sft_trainer_lora.py", games="sayword", train_instances="instances", init_adapter=str(start),
                max_steps=1, batch_size=2, learning_rate=0.0, save_steps=100, eval_max_instances=0,
                eval_sets="none", eval_static=False)
    summary = json.loads((toy_workspace / "models" / "sft+lora" / "tiny-yesno" / "playpen-run.json").read_text())
    rows = summary["before_after"]["rows"]
    assert "+start-" in summary["before_after"]["before"] and rows
    assert all(r["change"] in (0.0, None) and r["before"] == r["after"] for r in rows), rows
    assert any(r["before"] not in (None, 0.0) for r in rows)  # the start adapter wins sayword episodes
    assert "before (the start adapter (--init-adapter)) -> after" in capsys.readouterr().out
