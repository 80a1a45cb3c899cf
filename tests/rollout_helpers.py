"""Helpers of the rollout tests (plain functions; the fixtures are in conftest.py)."""
import math
from pathlib import Path

TOYGAMES_DIR = Path(__file__).resolve().parent / "toygames"


def make_learner(tiny_pair, temperature=1.0, max_new_tokens=6, name="tiny-random"):
    from playpen.rollouts import Learner, SamplingConfig
    model, tokenizer = tiny_pair
    return Learner(model, tokenizer, name, SamplingConfig(temperature=temperature, max_new_tokens=max_new_tokens))


class GenerateSpy:
    """Wraps playpen.inference.engine.generate and records the batch size of every call."""

    def __init__(self, monkeypatch):
        from playpen.inference import engine
        self.batch_sizes = []
        original = engine.generate

        def spy(model, tokenizer, prompts, sampling, *args, **kwargs):
            self.batch_sizes.append(len(prompts))
            return original(model, tokenizer, prompts, sampling, *args, **kwargs)

        monkeypatch.setattr(engine, "generate", spy)


# A chat template with Llama 3's habit: every message's text trimmed. A reply the model began or
# ended with whitespace renders shorter once a later turn follows it; the made-up check before
# training ("Hello.") passes.
TRIMMING = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}"
            "{{ m['content'] | trim }}{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


# sayword's all-"yes" instances ask for this word; tiny-yesno (conftest.yesno_model_dir) half-learnt it
PROMPT = "Reply with the single word: yes"


def p_yes(model, tokenizer) -> float:
    """The policy's exact probability of answering "yes<|im_end|>" after PROMPT: the WordSayer's
    expected binary reward on the all-"yes" sayword instances (noise-free)."""
    import torch
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                           tokenize=False)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = tokenizer(prompt + "yes<|im_end|>", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logprobs = model(torch.tensor([ids])).logits[0].log_softmax(-1)
    return math.exp(sum(logprobs[i - 1, ids[i]].item() for i in range(start, len(ids))))


# relay's Speaker prompt for 'apple', and a judge prompt short enough for a tiny model to learn
# (--judge-template FILE)
SPEAKER = ("You are the Speaker. Tell your partner the secret word 'apple'. "
           "Reply with exactly one line: WORD: <the word>")
JUDGE_TEMPLATE = "JUDGE-PROMPT-MARKER {{ role }} in {{ game }}: {{ candidate }}"


def teach_speaker_and_judge(model_dir, out):
    """The model in ``model_dir`` taught (plain torch, one thread: 9x faster on a busy 2-core
    machine) to answer relay's Speaker prompt with "WORD: apple" or "WORD: river" about
    equally often, and to judge them through JUDGE_TEMPLATE: apple "Score: 5", river
    "Score: 1"; saved in ``out``."""
    import torch
    from jinja2 import Template
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from playpen.rollouts.chat import prompt_ids
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    rows = [(SPEAKER, "WORD: apple"), (SPEAKER, "WORD: river")]
    rows += [(Template(JUDGE_TEMPLATE).render(candidate=f"WORD: {w}", role="Speaker", game="relay"), f"Score: {s}")
             for w, s in (("apple", 5), ("river", 1))]
    heads = [prompt_ids(tokenizer, [{"role": "user", "content": prompt}]) for prompt, _ in rows]
    tails = [tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"] for _, answer in rows]
    width, keep = max(len(h) + len(t) for h, t in zip(heads, tails)), max(map(len, tails)) + 1
    pad = tokenizer.pad_token_id  # left padding: every answer ends the row, only its logits are needed
    ids = torch.tensor([[pad] * (width - len(h) - len(t)) + h + t for h, t in zip(heads, tails)])
    mask = (torch.arange(width)[None, :] >= torch.tensor([[width - len(h) - len(t)] for h, t in zip(heads, tails)]))
    labels = torch.tensor([[-100] * (keep - 1 - len(t)) + t for t in tails])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    try:
        for _ in range(150):
            logits = model(input_ids=ids, attention_mask=mask.long(), logits_to_keep=keep).logits[:, :-1]
            torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
