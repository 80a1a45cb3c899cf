"""The drift of a trained adapter from its start, on the start's own replies
(playpen/evaluation/retention.py), held to transformers' own loss."""
from __future__ import annotations

import shutil

import pytest

RECORDS = [
    {"messages": [{"role": "user", "content": "Guess the word: a fruit, red or green."},
                  {"role": "assistant", "content": "GUESS: apple"},
                  {"role": "user", "content": "Wrong. It is small and grows in bunches."},
                  {"role": "assistant", "content": "GUESS: grape"}],
     "meta": {"game": "taboo", "experiment": "low_en", "game_id": 3, "player_name": "Player 2"}},
    {"messages": [{"role": "user", "content": "Which grid is the target? Answer with first, second or third."},
                  {"role": "assistant", "content": "Answer: second"}],
     "meta": {"game": "referencegame", "experiment": "line_grids", "game_id": 7, "player_name": "Player 2"}},
]


def random_adapter(model_dir, path, seed):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.save_pretrained(path)
    return path


def reference_logprob(model, tokenizer, messages):
    """The mean log-probability per token of the assistant turns from transformers' own
    causal-LM loss (labels -100 outside the turn), one turn at a time."""
    import torch
    total, count = 0.0, 0
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(messages[:i + 1], tokenize=False)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        ids = tokenizer(full, add_special_tokens=False)["input_ids"]
        labels = [-100] * len(p_ids) + ids[len(p_ids):]
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss
        n = len(ids) - len(p_ids)
        total, count = total - float(loss) * n, count + n
    return total / count


def test_drift_is_zero_for_the_start_and_matches_transformers_loss(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.evaluation.retention import adapters_logprobs, drift, item_key, turn_rows
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    start = random_adapter(tiny_model_dir, tmp_path / "start", seed=1)
    after = random_adapter(tiny_model_dir, tmp_path / "after", seed=2)
    copy = shutil.copytree(start, tmp_path / "copy")
    rows = turn_rows(tokenizer, RECORDS)
    assert [r.item for r in rows] == [item_key(RECORDS[0])] * 2 + [item_key(RECORDS[1])]
    assert item_key(RECORDS[1]) == "referencegame/line_grids/7/Player 2"
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    values = adapters_logprobs(base, rows, {"start": start, "copy": copy, "after": after, "base": None})

    # against transformers' loss, each adapter on a fresh copy of the base model
    for name, path in (("start", start), ("after", after), ("base", None)):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        if path is not None:
            model = PeftModel.from_pretrained(model, str(path))
        model.eval()
        for record in RECORDS:
            expected = reference_logprob(model, tokenizer, record["messages"])
            assert values[name][item_key(record)] == pytest.approx(expected, abs=1e-4), (name, record["meta"])

    changes = drift(values, "start")
    assert changes["copy"]["mean_change"] == 0.0 and changes["copy"]["p"] == 1.0
    assert changes["copy"]["rose"] == changes["copy"]["fell"] == 0 and changes["copy"]["items"] == 2
    moved = changes["after"]
    assert moved["mean_change"] != 0.0 and moved["rose"] + moved["fell"] == 2
    assert moved["mean_change"] == pytest.approx(
        sum(values["after"][i] - values["start"][i] for i in values["start"]) / 2)


def test_a_template_that_breaks_the_prefix_is_named(tiny_model_dir):
    from transformers import AutoTokenizer
    from playpen.errors import EvaluationError
    from playpen.evaluation.retention import turn_rows
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    # a template that renders the last user turn differently once a reply follows it
    tokenizer.chat_template = ("{% for m in messages %}{% if loop.last and m.role == 'user' %}LAST:{% endif %}"
                               "{{ m.role }}: {{ m.content }}\n{% endfor %}"
                               "{% if add_generation_prompt %}assistant:{% endif %}")
    with pytest.raises(EvaluationError, match="taboo/low_en/3/Player 2, turn 1"):
        turn_rows(tokenizer, RECORDS)
