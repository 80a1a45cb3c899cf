"""The learning protocol's referencegame diagnostic: a forced choice over the three answers.

Played greedily, the follower either names a grid or breaks the format, and a model that
always answers "first" is right a third of the time: the episode score cannot tell a
position prior from counting cells. This stage asks each final configuration (and the base
model) for the log-probability of each of the three well-formed answers (``Answer: first``,
``Answer: second``, ``Answer: third``, each up to the end of the turn as the chat template
renders it) after the prompt the follower got in its own test episode (the game master's
messages to the follower before its first reply, from ``interactions.json``), and keeps per
item:

- ``scores``: the probability of the target among the three (softmax over the three sums of
  token log-probabilities): 1/3 is chance, a position prior moves it no closer to 1 on average;
- ``correct``: 1 when the most likely of the three answers is the target;
- ``choice``: the position (1-3) of the most likely answer, and ``logprobs``: the three sums.

The report (``protocol_report.choice_lines``) gives per configuration the forced-choice
accuracy, the mean probability of the target, how often each position is chosen (a position
prior shows as one position chosen far above a third) and the targets chosen correctly at all
three of their positions (what a position prior cannot do).

Files: ``choice--<method>--seed<S>.json`` (``choice--base.json``), keyed by their own
fingerprint (the adapter, the configuration's test-result fingerprint, the learner, the
candidates): like the forgetting stage it never touches the test results, runs after each
seed (``--choice``) or on the finished seeds (``--choice-only``), and measures again when a
method is retrained.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from harness import fingerprint  # the benchmarks' shared module (this folder is on sys.path)
from protocol_forgetting import _relative, final_configurations
from protocol_report import BASE, choice_file, item_of, run_folder

from playpen.files import write_json

SETTING = "referencegame/follower"
GAME = "referencegame"
FOLLOWER_ROLE = "Instruction Follower"
POSITIONS = ("first", "second", "third")
ANSWER = "Answer: {}"


def follower_prompts(game_dir: Path, items) -> dict:
    """item -> ``{"messages": [...], "target": 1-3}`` for the `items` played in `game_dir`
    (a results folder of referencegame): the game master's messages to the follower before
    its first reply, and the target's position in the follower's grids (the game's
    ``target_position``, 1-based). Items not found are left out."""
    wanted, found = set(items), {}
    for path in sorted(Path(game_dir).rglob("interactions.json")):
        item = item_of(path.parent)
        if item not in wanted:
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        follower = next((name for name, p in record.get("players", {}).items()
                         if p.get("game_role") == FOLLOWER_ROLE), None)
        target = record.get("target_position")
        if follower is None or target not in (1, 2, 3):
            continue
        messages = []
        for event in (e for turn in record.get("turns", []) for e in turn):
            action = event.get("action", {})
            if event.get("from") == follower:
                break
            if event.get("to") == follower and action.get("type") == "send message":
                messages.append({"role": "user", "content": action["content"]})
        if messages:
            found[item] = {"messages": messages, "target": target}
    return found


def answer_logprobs(model, tokenizer, messages: list[dict], template_kwargs=None) -> list[float]:
    """The summed token log-probabilities of the three answers after `messages`, each up to
    and including the end of the assistant turn. The prompt runs once; each answer goes on
    from a copy of its key/value cache."""
    import copy

    import torch
    from transformers import DynamicCache

    from playpen.inference.transformers_compat import cache_kwarg
    from playpen.rollouts.chat import prompt_ids
    from playpen.training.preference.rounds import turn_ids
    device, key = next(model.parameters()).device, cache_kwarg(model)
    prompt = torch.tensor([prompt_ids(tokenizer, messages, template_kwargs)], device=device)
    out = []
    with torch.no_grad():
        shared = DynamicCache()
        first = model(input_ids=prompt, use_cache=True, **{key: shared})
        for position in POSITIONS:
            answer = turn_ids(tokenizer, messages, ANSWER.format(position), template_kwargs)
            logits = first.logits[0, -1:].float()
            if len(answer) > 1:
                rest = model(input_ids=torch.tensor([answer[:-1]], device=device),
                             use_cache=True, **{key: copy.deepcopy(shared)})
                logits = torch.cat([logits, rest.logits[0].float()])
            logprobs = torch.log_softmax(logits, dim=-1)
            out.append(float(logprobs[torch.arange(len(answer)), torch.tensor(answer, device=device)].sum()))
    return out


def choose(logprobs: list[float], target: int) -> dict:
    """The probability of the target among the three answers, the chosen position, correct."""
    top = max(logprobs)
    weights = [math.exp(v - top) for v in logprobs]
    choice = 1 + max(range(len(logprobs)), key=lambda i: logprobs[i])
    return {"p_target": weights[target - 1] / sum(weights), "choice": choice, "correct": int(choice == target)}


def measure(learner, prompts: dict) -> dict:
    """Per item: the three log-probabilities, the target's probability, the choice."""
    from tqdm import tqdm
    model, tokenizer = learner.model, learner.tokenizer
    kwargs = getattr(learner, "_chat_template_kwargs", None) or None
    model.eval()
    rows = {}
    for item, entry in tqdm(sorted(prompts.items()), desc="forced choice", leave=False):
        logprobs = answer_logprobs(model, tokenizer, entry["messages"], kwargs)
        rows[item] = {"logprobs": logprobs, "target": entry["target"], **choose(logprobs, entry["target"])}
    return rows


def test_game_dir(work: Path, seed: int, name: str) -> Path:
    """Where the configuration's test episodes of the follower setting are (protocol.evaluate_split)."""
    return work / "results" / run_folder(f"seed{seed}-{name}", "test", SETTING) / GAME


def run_choice(seeds, names, args, out: Path, work: Path, items) -> None:
    """The base model once, then every finished final configuration of `seeds`; each cached.
    Prompts come from each configuration's own test episodes (the base model: the first
    configuration's; the programmatic giver gives every configuration the same)."""
    from playpen.models import load_model_by_name
    jobs = []
    for seed in seeds:
        for name, adapter, key, failed in final_configurations(seed, names, out, work):
            game_dir = test_game_dir(work, seed, name)
            if game_dir.is_dir():
                jobs.append((name, seed, adapter, key, failed, game_dir))
            else:
                print(f"== choice: {name} seed {seed} has no test episodes in {game_dir}; skipped", flush=True)
    if not jobs:
        print("== choice: no finished configuration with test episodes of the referencegame follower", flush=True)
        return
    jobs.insert(0, (BASE, None, None, "", False, jobs[0][5]))
    settings = {"learner": args.learner, "answers": [ANSWER.format(p) for p in POSITIONS]}
    for name, seed, adapter, config_key, failed, game_dir in jobs:
        adapter_id = None if adapter is None else _relative(adapter, work)
        key = fingerprint(("choice", name, seed, adapter_id, config_key, settings))
        path = out / choice_file(name, seed)
        if path.exists() and json.loads(path.read_text(encoding="utf-8")).get("fingerprint") == key:
            continue
        prompts = follower_prompts(game_dir, items)
        if len(prompts) < len(items):
            print(f"== choice: {name}{'' if seed is None else f' seed {seed}'}: {len(items) - len(prompts)} of "
                  f"{len(items)} test items have no follower prompt in {game_dir}; skipped", flush=True)
            continue
        print(f"== choice: {name}{'' if seed is None else f' seed {seed}'} ({adapter_id or 'no adapter'}), "
              f"{len(prompts)} items", flush=True)
        started = time.time()
        label = BASE if seed is None else f"seed{seed}-{name}"
        learner = load_model_by_name(args.learner, gen_args=dict(temperature=0.0, max_tokens=16),
                                     role="learner", adapter=adapter, run_name=label)
        rows = measure(learner, prompts)
        del learner
        write_json(path, {
            "method": name, "seed": seed, "game": GAME, "setting": SETTING, "split": "test",
            "adapter": adapter_id, "fingerprint": key, "config_fingerprint": config_key, "failed": failed,
            **settings, "scores": {i: r["p_target"] for i, r in rows.items()},
            "correct": {i: r["correct"] for i, r in rows.items()},
            "choice": {i: r["choice"] for i, r in rows.items()},
            "target": {i: r["target"] for i, r in rows.items()},
            "logprobs": {i: r["logprobs"] for i, r in rows.items()},
            "seconds": round(time.time() - started, 1)}, indent=1)

