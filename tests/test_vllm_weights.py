"""The weight transfer of full fine-tuning (playpen.inference.vllm_weights) without vLLM:
the learner's base weights go under its checkpoint's names (a peft model's too), in chunks
that never split a layer, and survive the byte encoding; the folder's digest is the fresh
model's. The transfer into a running engine: tests/test_vllm_engine.py."""
import torch
from safetensors.torch import load_file

from playpen.inference.vllm_weights import base_weights, decode, digest, encode, folder_digest, layer_chunks


def _tiny_llama(folder):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    return LlamaForCausalLM.from_pretrained(folder)


def test_base_weights_carry_the_checkpoints_names_also_under_peft(tmp_path):
    from peft import LoraConfig, get_peft_model
    model = _tiny_llama(tmp_path)
    stored = load_file(str(tmp_path / "model.safetensors"))
    assert [n for n, _ in base_weights(model)] == list(dict(model.named_parameters()))
    assert "lm_head.weight" not in dict(base_weights(model))  # tied: sent once, as the input embedding
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", modules_to_save=["norm"]))
    names = [n for n, _ in base_weights(peft_model)]
    assert set(names) <= set(stored) and len(names) == len(set(names))
    assert not any("lora_" in n or "base_model" in n or "modules_to_save" in n for n in names)
    assert all(torch.equal(t, stored[n]) for n, t in base_weights(peft_model))


def test_chunks_hold_whole_layers_within_the_budget_and_survive_encoding(tmp_path):
    model = _tiny_llama(tmp_path)
    named = list(base_weights(model))
    layer_bytes = sum(t.numel() * t.element_size() for n, t in named if n.startswith("model.layers.0."))
    chunks = list(layer_chunks(named, max_bytes=layer_bytes + 1))
    assert [n for chunk in chunks for n, _ in chunk] == [n for n, _ in named]  # all, once, in order
    for k in range(3):  # each decoder layer within one chunk
        assert sum(any(n.startswith(f"model.layers.{k}.") for n, _ in chunk) for chunk in chunks) == 1
    assert all(sum(t.numel() * t.element_size() for _, t in chunk) <= layer_bytes + 1 for chunk in chunks)
    assert len(chunks) > 1 and len(list(layer_chunks(named, max_bytes=10**12))) == 1
    alone = list(layer_chunks(named, max_bytes=1))  # a layer larger than the budget goes alone, whole
    assert len(alone) == 3 + 2 and [n for n, _ in alone[1]][0].startswith("model.layers.0.")  # + embedding, norm
    bf16 = [(n, t.to(torch.bfloat16)) for n, t in named[:3]]
    for (name, tensor), (back_name, back) in zip(bf16, decode(encode(bf16)), strict=True):
        assert back_name == name and back.dtype == torch.bfloat16 and torch.equal(back, tensor)


def test_the_folders_digest_is_the_fresh_models_and_not_a_changed_ones(tmp_path):
    model = _tiny_llama(tmp_path)
    names = [n for n, _ in base_weights(model)]
    assert folder_digest(str(tmp_path), names) == digest(base_weights(model))
    with torch.no_grad():
        model.model.layers[2].mlp.down_proj.weight.add_(0.01)
    assert folder_digest(str(tmp_path), names) != digest(base_weights(model))
    assert folder_digest(str(tmp_path), names + ["model.not_there.weight"]) is None
