"""playpen's DPO step against TRL's stock ``DPOTrainer`` on the same pairs: the same loss and the
same update of every LoRA weight.

playpen's :class:`~playpen.training.trl_trainers.TokenDPOTrainer` trains on token ids (the
pairs come from episodes, already token-exact) where TRL's renders and tokenises text; here
it gets exactly the ids TRL's own preparation produced, the same start adapter (random,
non-zero: the policy differs from the adapter-free reference) and plain SGD at learning rate
1, so a parameter's change is minus its gradient.
"""
import pytest

PAIRS = {"prompt": ["What is 2 + 3?", "Name a colour of the sky.", "Say hello."],
         "chosen": ["5", "Blue.", "Hello!"],
         "rejected": ["It is 6, I think.", "green", "Goodbye."]}


def start_model(model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    return get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                          LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                     init_lora_weights=False, task_type="CAUSAL_LM"))


def one_step(trainer) -> tuple[dict, float]:
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    trainer.train()
    after = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    loss = next(h["loss"] for h in trainer.state.log_history if "loss" in h)
    return {n: after[n] - before[n] for n in before}, loss


def args(tmp_path, name, **overrides) -> dict:
    out = dict(output_dir=str(tmp_path / name), max_steps=1, learning_rate=1.0, lr_scheduler_type="constant",
               max_grad_norm=0.0, per_device_train_batch_size=3, gradient_accumulation_steps=1, beta=0.1,
               loss_type=["sigmoid"], max_length=64, logging_steps=1, save_strategy="no", report_to="none",
               seed=0, disable_tqdm=True, dataloader_num_workers=0, use_cpu=True)
    out.update(overrides)
    return out


@pytest.mark.parametrize("share", [False, True])
def test_a_playpen_dpo_step_equals_trls_stock_step(tmp_path, tiny_model_dir, share):
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from playpen.training.trl_trainers import PlaypenDPOConfig, TokenDPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    def sgd(model):
        return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0), None

    stock_model = start_model(tiny_model_dir)
    stock = DPOTrainer(model=stock_model, args=DPOConfig(**args(tmp_path, "stock")),
                       train_dataset=Dataset.from_dict(PAIRS), processing_class=tokenizer,
                       optimizers=sgd(stock_model))
    ids = stock.train_dataset.select_columns(["prompt_ids", "chosen_ids", "rejected_ids"])
    stock_delta, stock_loss = one_step(stock)

    # --share-prompts: one pair per pass (its prompt run once), accumulated over the step
    batch = dict(per_device_train_batch_size=1, gradient_accumulation_steps=3) if share else {}
    mine_model = start_model(tiny_model_dir)
    mine = TokenDPOTrainer(model=mine_model, args=PlaypenDPOConfig(**args(tmp_path, "mine", **batch),
                                                                   share_prompts=share),
                           train_dataset=ids, processing_class=tokenizer, optimizers=sgd(mine_model))
    mine_delta, mine_loss = one_step(mine)

    assert sorted(mine_delta) == sorted(stock_delta)
    norm = sum(float(d.pow(2).sum()) for d in stock_delta.values()) ** 0.5
    assert norm > 0, "the stock step changed nothing"
    error = sum(float((mine_delta[n] - stock_delta[n]).pow(2).sum()) for n in stock_delta) ** 0.5
    if share:  # three passes of one pair instead of one of three: the same sums, other padding
        assert error / norm < 5e-3, error / norm
        assert mine.state.log_history and mine_loss == pytest.approx(stock_loss, rel=5e-3)
    else:
        assert error == 0.0, error / norm
        assert mine_loss == stock_loss
