"""Batched generation with logprobs, and chat templating as token ids."""
import pytest
import torch


from playpen.inference.engine import generate
from playpen.inference.model_facts import eos_token_ids
from playpen.rollouts import SamplingConfig, chat

MESSAGES = [[{"role": "user", "content": "Say hello"}],
            [{"role": "user", "content": "A much longer prompt with many more words in it, to force padding"}]]


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_logprobs_match_a_forward_pass(tiny_pair, temperature):
    model, tokenizer = tiny_pair
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES]
    torch.manual_seed(0)
    generations = generate(model, tokenizer, prompts, SamplingConfig(temperature=temperature, max_new_tokens=6))
    for prompt, gen in zip(prompts, generations):
        assert len(gen.token_ids) == len(gen.logprobs) == 6 and not gen.finished
        ids = torch.tensor([list(prompt) + list(gen.token_ids)])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / (temperature or 1.0), -1).gather(
            1, torch.tensor(gen.token_ids)[:, None]).squeeze(1)
        assert torch.allclose(expected, torch.tensor(gen.logprobs), atol=1e-4)
        assert gen.text == tokenizer.decode(list(gen.token_ids))


def test_rows_stop_at_their_own_eos_and_chunks_split(tiny_pair, monkeypatch):
    model, tokenizer = tiny_pair
    eos = tokenizer.eos_token_id
    prompts = [chat.prompt_ids(tokenizer, MESSAGES[0])] * 3
    calls = []
    original = model.generate

    def fake_generate(input_ids, attention_mask, **kwargs):
        calls.append(input_ids.shape[0])
        out = original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        # make row 0 end after two tokens: eos, then padding
        out.sequences[0, input_ids.shape[1] + 1] = eos
        out.sequences[0, input_ids.shape[1] + 2:] = tokenizer.pad_token_id
        return out

    monkeypatch.setattr(model, "generate", fake_generate)
    model.train()
    generations = generate(model, tokenizer, prompts, SamplingConfig(max_new_tokens=5, max_batch_size=2))
    assert calls == [2, 1]
    assert model.training  # the caller's mode is restored
    model.eval()
    first = generations[0]
    assert first.finished and len(first.token_ids) == 2 and first.token_ids[-1] == eos
    assert first.text == tokenizer.decode(list(first.token_ids[:1]))
    assert eos in eos_token_ids(model, tokenizer)


def test_continuation_ids_close_the_turn_only_when_the_model_did_not(tiny_pair):
    _, tokenizer = tiny_pair
    new = [{"role": "user", "content": "next"}]
    closed = tokenizer.decode(chat.continuation_ids(tokenizer, new, tokenizer.eos_token_id))
    cut = tokenizer.decode(chat.continuation_ids(tokenizer, new, 42))
    assert closed == "\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n"
    assert cut == "<|im_end|>" + closed


def test_normalize_messages_merges_like_clemcore():
    messages = [{"role": "system", "content": ""}, {"role": "user", "content": "a", "image": "x"},
                {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]
    assert chat.normalize_messages(messages) == [{"role": "user", "content": "a\n\nb"},
                                                 {"role": "assistant", "content": "c"}]


def test_shared_prefixes_give_the_same_tokens_and_logprobs(tiny_pair):
    model, tokenizer = tiny_pair
    rules = "Here are the rules of the game. " * 8
    messages = [[{"role": "user", "content": rules + word}] for word in ("apple", "a river", "stone")] * 2
    messages += [[{"role": "user", "content": "Other " + rules}], [{"role": "user", "content": "hi"}]]
    prompts = [chat.prompt_ids(tokenizer, m) for m in messages]
    for temperature in (0.0, 1.0):
        torch.manual_seed(0)
        plain = generate(model, tokenizer, prompts, SamplingConfig(temperature, 6), share_prefix=False)
        torch.manual_seed(0)
        shared = generate(model, tokenizer, prompts, SamplingConfig(temperature, 6), share_prefix=True)
        for a, b in zip(plain, shared):
            assert a.token_ids == b.token_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_prefix_plan_groups_rows_that_start_alike():
    from playpen.inference.prefixes import plan_prefixes
    a = list(range(100))
    prompts = [a + [1], a + [2], a + [1], [7] * 40, [7] * 40]
    plan = plan_prefixes(prompts)
    assert sorted(plan.groups) == [(39, (3, 4)), (100, (0, 1, 2))]
    assert plan.prefix_of(2) == 100 and plan.prefix_of(4) == 39


# ----------------------------------------------------------------------------- template continuity

def test_a_template_that_is_not_prefix_continuous_is_named_in_one_line(smol_tokenizer_dir):
    from transformers import AutoTokenizer
    from playpen.rollouts.chat import continuity_problem, warn_if_discontinuous
    tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    said = []
    assert continuity_problem(tokenizer) is None  # SmolLM2's: the turn-by-turn tokens equal the render
    assert warn_if_discontinuous(tokenizer, "smol", echo=said.append) is None and said == []
    # a template that adds a system block once the conversation has a history: turn 1's prompt
    # lacked it, so the growing sequence and the render part after the first <|im_start|>
    tokenizer.chat_template = (
        "{% if messages|length > 1 %}<|im_start|>system\nHistory follows.<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    problem = warn_if_discontinuous(tokenizer, "odd-model", echo=said.append)
    assert problem.startswith("after 1 tokens") and "History follows" in problem
    assert len(said) == 1 and "odd-model" in said[0] and "\n" not in said[0]
    # one that hides earlier replies: the model's turn cannot be located at all
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' and not loop.last %}"
        "[earlier]{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    assert "dropped the assistant turn" in continuity_problem(tokenizer)


def test_a_template_that_breaks_only_on_a_games_own_messages_is_named_once_per_game_and_role(
        smol_tokenizer_dir, monkeypatch):
    from transformers import AutoTokenizer
    from playpen.rollouts import chat
    monkeypatch.setattr(chat, "_CHECKED", set())
    tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    smol_template = tokenizer.chat_template
    # Mistral's first templates: the system message goes into the LAST user turn, so the first
    # prompt has it where the render of the history has it later; without one it is continuous
    tokenizer.chat_template = (
        "{% set sys = messages[0]['content'] if messages[0]['role'] == 'system' else '' %}"
        "{% set last = namespace(i=-1) %}{% for m in messages %}{% if m['role'] == 'user' %}"
        "{% set last.i = loop.index0 %}{% endif %}{% endfor %}"
        "{% for m in messages if m['role'] != 'system' %}<|im_start|>{{ m['role'] }}\n"
        "{% if sys and m['role'] == 'user' and loop.index0 == last.i - 1 %}{{ sys }}\n\n{% endif %}"
        "{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    game = [{"role": "user", "content": "Describe 'apple'."}, {"role": "assistant", "content": "CLUE: a fruit"},
            {"role": "user", "content": "Wrong. Again."}, {"role": "assistant", "content": "CLUE: red"}]
    assert chat.continuity_problem(tokenizer) is None and chat.conversation_problem(tokenizer, game) is None
    with_system = [{"role": "system", "content": "You play taboo."}, *game]
    said = []
    for _ in range(3):  # every episode calls it; the first conversation of a game and role is checked
        chat.warn_once_if_discontinuous(tokenizer, "odd-model", "taboo", "Describer", with_system, echo=said.append)
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("[playpen] the chat template of odd-model is not prefix-continuous on taboo "
                              "(Describer): after ") and "You play taboo" in said[0]
    chat.warn_once_if_discontinuous(tokenizer, "odd-model", "taboo", "Guesser", with_system, echo=said.append)
    assert len(said) == 2 and "(Guesser)" in said[1]
    # a one-turn conversation has no history yet: it does not use up the game's check
    chat.warn_once_if_discontinuous(tokenizer, "odd-model", "wordle", "Guesser", with_system[:3], echo=said.append)
    chat.warn_once_if_discontinuous(tokenizer, "odd-model", "wordle", "Guesser", with_system, echo=said.append)
    assert len(said) == 3 and "on wordle (Guesser)" in said[2]
    # SmolLM2's own template, a reply that starts with newlines: the same text, other tokens
    # (the render merges them with the generation prompt's newline)
    tokenizer.chat_template = smol_template
    seam = chat.conversation_problem(tokenizer, [game[0], {"role": "assistant", "content": "\n\nCLUE"}, game[2]])
    assert seam is not None and "the same text in other tokens" in seam
