"""playpen's GRPO step against TRL's stock ``GRPOTrainer`` on the same rows: the same loss and
the same update of every LoRA weight.

Both trainers get the same start adapter (random, non-zero: the KL term to the adapter-free
base has a gradient), the same two prompts with four fixed completions each (through TRL's
``rollout_func``), the same rewards and plain SGD at learning rate 1, so a parameter's change
is minus its gradient. playpen computes the advantages itself (``--baseline group``,
``--scale-rewards``) and may run the rows' shared prompt once (``--share-prompts``); TRL's
stock trainer is told the same objective (:func:`playpen.training.grpo.objective.objective_args`).
"""
import pytest

PROMPTS = ["What is 2 + 3?", "Name a colour of the sky."]
COMPLETIONS = [["5", "five", "It is 6.", "7"], ["blue", "Blue, mostly.", "green", "red"]]
REWARDS = [[1.0, 1.0, 0.0, 0.0], [1.0, 0.5, 0.0, 0.25]]
GROUP = 4


def start_model(model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    return get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                          LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                     init_lora_weights=False, task_type="CAUSAL_LM"))


def fixed_rollout(tokenizer, rewards=REWARDS):
    """TRL's rollout_func: each prompt's k-th repetition gets its k-th fixed completion."""
    def rollout(prompts, trainer):
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "fixed_reward": []}
        seen: dict[str, int] = {}
        for prompt in prompts:
            k = seen.get(prompt, 0)
            seen[prompt] = k + 1
            p = PROMPTS.index(prompt)
            ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                                tokenize=True, return_dict=False)
            completion = tokenizer(COMPLETIONS[p][k] + "<|im_end|>", add_special_tokens=False)["input_ids"]
            out["prompt_ids"].append(list(ids))
            out["completion_ids"].append(completion)
            out["logprobs"].append([0.0] * len(completion))
            out["fixed_reward"].append(rewards[p][k])
        return out
    return rollout


def fixed_reward(completions, fixed_reward, **kwargs):
    return list(fixed_reward)


def common_args(tmp_path, name, **overrides):
    args = dict(output_dir=str(tmp_path / name), max_steps=1, learning_rate=1.0, lr_scheduler_type="constant",
                max_grad_norm=0.0, num_generations=GROUP, per_device_train_batch_size=2 * GROUP,
                gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1, beta=0.02,
                shuffle_dataset=False, logging_steps=1, save_strategy="no", report_to="none", seed=0,
                disable_tqdm=True, max_completion_length=16, dataloader_num_workers=0, use_cpu=True)
    args.update(overrides)
    return args


def lora_weights(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def train_one_step(trainer) -> tuple[dict, float]:
    before = lora_weights(trainer.model)
    trainer.train()
    after = lora_weights(trainer.model)
    loss = next(h["loss"] for h in trainer.state.log_history if "loss" in h)
    return {n: after[n] - before[n] for n in before}, loss


@pytest.mark.parametrize("loss_type,scale,micro,share", [("dapo", "group", False, False), ("grpo", "none", False, False),
                                                        ("dapo", "group", True, False), ("dapo", "group", True, True)])
def test_a_playpen_grpo_step_equals_trls_stock_step(tmp_path, tiny_model_dir, loss_type, scale, micro, share):
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from playpen.training.grpo.advantages import Advantages, BatchAdvantages
    from playpen.training.grpo.objective import ObjectiveOptions, objective_args
    from playpen.training.trl_trainers import PlaypenGRPOConfig, PlaypenGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    dataset = Dataset.from_dict({"prompt": PROMPTS})
    objective = objective_args(ObjectiveOptions(loss_type=loss_type, scale_rewards=scale))

    def sgd(model):
        return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0), None

    # micro: the step's 8 rows in two micro-batches of 4 (gradients accumulated), in both trainers
    micro = dict(per_device_train_batch_size=GROUP, gradient_accumulation_steps=2, steps_per_generation=2) \
        if micro else {}
    stock_model = start_model(tiny_model_dir)
    stock = GRPOTrainer(model=stock_model, reward_funcs=[fixed_reward], train_dataset=dataset,
                        args=GRPOConfig(**common_args(tmp_path, "stock", **objective, **micro)),
                        processing_class=tokenizer, rollout_func=fixed_rollout(tokenizer),
                        optimizers=sgd(stock_model))
    stock_delta, stock_loss = train_one_step(stock)

    mine_model = start_model(tiny_model_dir)
    rows = {"reward": [r for group in REWARDS for r in group], "role": ["R"] * 8, "game": ["g"] * 8}
    advantages = BatchAdvantages(Advantages("group", GROUP, scale=scale, echo=lambda line: None), lambda: rows)
    mine = PlaypenGRPOTrainer(model=mine_model, reward_funcs=[fixed_reward], train_dataset=dataset,
                              args=PlaypenGRPOConfig(**common_args(tmp_path, "mine", **objective, **micro),
                                                     share_prompts=share),
                              processing_class=tokenizer, rollout_func=fixed_rollout(tokenizer),
                              optimizers=sgd(mine_model), advantages=advantages)
    mine_delta, mine_loss = train_one_step(mine)

    assert sorted(mine_delta) == sorted(stock_delta)
    norm = sum(float(d.pow(2).sum()) for d in stock_delta.values()) ** 0.5
    assert norm > 0, "the stock step changed nothing"
    error = sum(float((mine_delta[n] - stock_delta[n]).pow(2).sum()) for n in stock_delta) ** 0.5
    if share:
        # the shared prompt runs once: the same sums in another order and padding. TRL's own step,
        # cut into two micro-batches instead of one, differs from itself by 2.4e-3 of the norm here
        # (measured 2026-11-28); sharing differs from TRL's by 2.5e-3. A wrong position or mask is ~1
        assert error / norm < 5e-3, error / norm
    else:
        assert error == 0.0, error / norm  # the same computation, bit for bit
        assert mine_loss == stock_loss


def test_playpen_sets_every_term_of_the_objective():
    from playpen.training.grpo.objective import ObjectiveOptions, objective_args
    from trl import GRPOConfig
    args = objective_args(ObjectiveOptions(loss_type="grpo", epsilon=0.1, epsilon_high=0.28, scale_rewards="none"))
    assert args["loss_type"] == "grpo" and args["epsilon"] == 0.1 and args["epsilon_high"] == 0.28
    assert args["scale_rewards"] == "none" and objective_args(ObjectiveOptions())["epsilon_high"] == 0.2
    # every keyword is one of TRL's GRPOConfig fields (a renamed field fails here, not in a run)
    assert set(args) <= set(GRPOConfig.__dataclass_fields__)
