"""Preference learning from games: pairs from recorded play and from branched episodes
(shared prompts, token for token; ordered by outcome), the pairs export, the DPO and SPIN
trainers through `playpen run` on tiny models (the adapter changes; rounds; resume), and
their user errors (one line, exit 2, nothing written)."""
import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.pairs import PreferencePair, branch_pairs, read_pairs, recorded_pairs, turn_span

REPO_ROOT = Path(__file__).resolve().parents[1]
DPO_TRAINER = "dpo"
SPIN_TRAINER = "spin"
RUNS = REPO_ROOT / "tests" / "fixtures" / "clembench-runs-v2.0"
TOYGAMES = REPO_ROOT / "tests" / "toygames"
SPEAKER = ("You are the Speaker. Tell your partner the secret word 'apple'. "
           "Reply with exactly one line: WORD: <the word>")


@pytest.fixture(scope="session")
def relay_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model taught (plain torch) to answer relay's Speaker prompt for
    'apple' with "WORD: apple" or "WORD: river" about equally often: branches at its first
    move then win (the programmatic Listener repeats the word) or not."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": SPEAKER}], add_generation_prompt=True,
                                           tokenize=False)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([tokenizer(prompt + f"WORD: {w}<|im_end|>", add_special_tokens=False)["input_ids"]
                        for w in ("apple", "river")])
    labels = ids.clone()
    labels[:, :start] = -100
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(80):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    out = tmp_path_factory.mktemp("tiny-relay")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture
def relay_workspace(tiny_workspace, relay_model_dir):
    """tiny_workspace + `tiny-relay` + the toy relay game whose training instances all say 'apple'."""
    games = tiny_workspace / "toygames"
    shutil.copytree(TOYGAMES / "relay", games / "relay")
    (games / "relay" / "in" / "instances_train.json").write_text(json.dumps({"experiments": [
        {"name": "short", "max_rounds": 2, "game_instances": [{"game_id": i, "word": "apple"} for i in range(2)]}]}))
    entries = json.loads((tiny_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-relay", "huggingface_id": str(relay_model_dir)})
    (tiny_workspace / "model_registry.json").write_text(json.dumps(entries))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    return tiny_workspace


def lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file
    return {n: w for n, w in load_file(checkpoint / "adapter_model.safetensors").items() if "lora_B" in n}


def steps_of(run_dir: Path) -> list[dict]:
    return [r for r in map(json.loads, (run_dir / "playpen-log.jsonl").read_text().splitlines())
            if r["event"] == "train_step"]


# ----------------------------------------------------------------------------- recorded play

def test_recorded_pairs_share_the_prompt_and_chosen_comes_from_the_won_episode():
    from playpen.data import conversational_records
    records, _ = conversational_records(RUNS)
    pairs = recorded_pairs(records)
    assert len(pairs) == 1  # wordle medium/0: gpt-4o won, Llama lost; the other shared instances tie
    pair = pairs[0]
    meta = pair.meta
    assert (meta["game"], meta["game_id"], meta["turn"]) == ("wordle", 0, 0)
    assert meta["chosen"]["outcome"] == "success" and meta["rejected"]["outcome"] == "failure"
    by_model = {r["meta"]["model"]: r["messages"] for r in records if r["meta"]["game"] == "wordle"
                and r["meta"]["experiment"] == meta["experiment"] and r["meta"]["game_id"] == 0}
    won, lost = by_model[meta["chosen"]["model"]], by_model[meta["rejected"]["model"]]
    n = len(pair.prompt)
    assert list(pair.prompt) == won[:n] == lost[:n]
    assert (pair.chosen, pair.rejected) == (won[n]["content"], lost[n]["content"])


def test_recorded_pairs_part_only_at_the_players_own_turn():
    def record(outcome, *contents):
        roles = ["user", "assistant"] * len(contents)
        return {"messages": [{"role": r, "content": c} for r, c in zip(roles, contents)],
                "meta": {"game": "g", "experiment": "e", "game_id": 0, "game_role": "R", "player_name": "P",
                         "outcome": outcome}}
    won = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
                        {"role": "user", "content": "more"}, {"role": "assistant", "content": "b"}],
           "meta": record("success")["meta"]}
    parts_at_second_turn = {**won, "messages": won["messages"][:3] + [{"role": "assistant", "content": "x"}],
                            "meta": {**won["meta"], "outcome": "aborted"}}
    game_said_other = {**won, "messages": won["messages"][:2] + [{"role": "user", "content": "other"},
                                                                  {"role": "assistant", "content": "y"}],
                       "meta": {**won["meta"], "outcome": "failure"}}
    prefix_only = {**won, "messages": won["messages"][:2], "meta": {**won["meta"], "outcome": "failure"}}
    pairs = recorded_pairs([won, parts_at_second_turn, game_said_other, prefix_only])
    assert [(len(p.prompt), p.chosen, p.rejected) for p in pairs] == [(3, "b", "x")]


def test_dataset_pairs_export_is_trl_preference_format(tmp_path):
    out = tmp_path / "pairs.jsonl"
    result = CliRunner().invoke(cli, ["dataset", str(RUNS), "-o", str(out), "--pairs"])
    assert result.exit_code == 0, result.output
    assert "wrote 1 preference pairs from 41 episodes" in result.output
    from datasets import load_dataset
    data = load_dataset("json", data_files=str(out), split="train")
    assert {"prompt", "chosen", "rejected", "meta"} <= set(data.column_names)
    assert data[0]["chosen"][0]["role"] == "assistant" and data[0]["prompt"][0]["role"] == "user"
    assert read_pairs(out)[0] == recorded_pairs(__import__("playpen.data").data.conversational_records(RUNS)[0])[0]
    # no pairs among the chosen games: one line, nothing written
    empty = tmp_path / "none.jsonl"
    result = CliRunner().invoke(cli, ["dataset", str(RUNS), "-o", str(empty), "--pairs", "-g", "taboo"])
    assert result.exit_code == 2 and "no preference pairs" in result.output and result.output.count("\n") == 1
    assert not empty.exists()


# ----------------------------------------------------------------------------- branching

def _trajectory(player, prompt, completion, mask, reward, messages, segment=0):
    from playpen.rollouts import Trajectory
    return Trajectory("e", "relay", "short", 0, 0, player, "Speaker", "m", tuple(prompt), tuple(completion),
                      tuple(mask), tuple(0.0 for _ in mask), sum(1 for i, x in enumerate(mask)
                                                              if x and (i == 0 or not mask[i - 1])),
                      "success", 100.0, reward, "g", segment=segment, messages=tuple(messages))


def _episode(index, reward, turn_ids, group="relay/short/0/r0@Player 1#1"):
    """A branch forked at the Speaker's second turn: shared prefix [1, 2] + turn 0 [5, 6]
    + environment [7], then the branch's own turn, then environment [9]."""
    from playpen.rollouts import EpisodeResult
    completion = [5, 6, 7, *turn_ids, 9]
    mask = [1, 1, 0] + [1] * len(turn_ids) + [0]
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "first"},
                {"role": "user", "content": "again"}, {"role": "assistant", "content": f"turn {turn_ids}"},
                {"role": "user", "content": "end"}]
    t = _trajectory("Player 1", [1, 2], completion, mask, reward, messages)
    outcome = "success" if reward > 0 else ("aborted" if reward < 0 else "failure")
    return EpisodeResult(f"relay/short/0/r0/b{index}", "relay", "short", 0, 0, outcome, 100.0 * max(reward, 0),
                         {"Player 1": reward}, {"Player 1": "Speaker"}, {"Player 1": "m"}, 2, (), (t,),
                         group_id=group, branch_path=(index,))


def test_branch_pairs_from_hand_made_branches_are_ordered_by_outcome():
    episodes = [_episode(0, 0.2, [11]), _episode(1, 1.0, [12, 13]), _episode(2, -1.0, [14]),
                _episode(3, 1.0, [15]),  # ties with branch 1: no pair between them
                _episode(4, math.nan, [16]),  # failed: no pair
                _episode(5, -1.0, [12, 13]),  # the same turn as branch 1: no pair between them
                _episode(6, 1.0, [99], group="relay/short/0/r0")]  # not a fork
    pairs = branch_pairs(episodes)
    got = {(p.chosen_ids, p.rejected_ids) for p in pairs}
    assert got == {((12, 13), (11,)), ((12, 13), (14,)), ((15,), (11,)), ((15,), (14,)), ((15,), (12, 13)),
                   ((11,), (14,)), ((11,), (12, 13))}
    for p in pairs:
        assert p.prompt_ids == (1, 2, 5, 6, 7)
        assert p.meta["chosen"]["reward"] > p.meta["rejected"]["reward"]
        assert p.meta["turn"] == 1 and p.meta["source"] == "branching"
        assert [m["content"] for m in p.prompt] == ["go", "first", "again"]
        assert p.chosen == f"turn {list(p.chosen_ids)}"


def test_turn_span_counts_turns_over_segments():
    first = _trajectory("P", [1], [5, 6, 7, 8, 9], [1, 0, 1, 1, 0], 0.0, [])
    second = _trajectory("P", [2], [3, 4], [1, 1], 0.0, [], segment=1)
    assert turn_span([second, first], 1)[1:3] == (2, 4)
    span = turn_span([second, first], 2)
    assert span[0] is second and span[1:3] == (0, 2)
    assert turn_span([first, second], 3) is None


def test_branch_pairs_of_relay_share_the_prompt_ids_exactly(relay_workspace):
    from playpen.models import load_model_by_name
    from playpen.rollouts import Branching, InstanceRef, Learner, SamplingConfig, rollout
    clem = load_model_by_name("tiny-relay", role="learner")
    learner = Learner(clem.model, clem.tokenizer, "tiny-relay", SamplingConfig(temperature=1.0, max_new_tokens=6))
    result = rollout("relay", learner, roles=["Speaker"], partners={"Listener": "programmatic"},
                     instances=[InstanceRef("relay", "short", 0)], instances_file="instances_train",
                     num_repeats=2, branching=Branching(factor=6), records_dir=None, seed=3)
    pairs = branch_pairs(result.episodes)
    assert pairs, [e.outcome for e in result.episodes]
    for pair in pairs:
        members = [e for e in result.episodes if e.group_id == pair.meta["fork"]]
        good = next(e for e in members if e.episode_id == pair.meta["chosen"]["episode"])
        bad = next(e for e in members if e.episode_id == pair.meta["rejected"]["episode"])
        assert good.rewards["Player 1"] > bad.rewards["Player 1"]
        for episode, turn in ((good, pair.chosen_ids), (bad, pair.rejected_ids)):
            t = episode.trajectories[0]
            whole = t.prompt_ids + t.completion_ids
            assert whole[:len(pair.prompt_ids)] == pair.prompt_ids  # the fork's tokens, not a re-render
            assert whole[len(pair.prompt_ids):len(pair.prompt_ids) + len(turn)] == turn
        assert pair.prompt_ids == good.trajectories[0].prompt_ids  # a first-move fork
        assert clem.tokenizer.decode(pair.chosen_ids).startswith(pair.chosen)


def test_message_pairs_tokenise_like_the_rollout_engine(tiny_pair):
    from playpen.rollouts.chat import prompt_ids
    from playpen.training.preference.rounds import pair_row
    _, tokenizer = tiny_pair
    prompt = ({"role": "user", "content": SPEAKER},)
    row = pair_row(tokenizer, PreferencePair(prompt, "WORD: apple", "no idea"))
    assert row["prompt_ids"] == prompt_ids(tokenizer, prompt)
    assert row["chosen_ids"][-1] == tokenizer.eos_token_id
    whole = tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": "WORD: apple"}], tokenize=False)
    assert tokenizer.decode(row["prompt_ids"] + row["chosen_ids"]) == whole.rstrip("\n")


# ----------------------------------------------------------------------------- the trainers

def test_dpo_from_branches_via_playpen_run_trains_the_adapter(relay_workspace):
    result = CliRunner().invoke(cli, [
        "run", str(DPO_TRAINER), "-l", "tiny-relay", "-t", "programmatic", "-T", "1.0", "-L", "6",
        "--games", "relay", "--roles", "Speaker", "--branches", "6", "--pair-instances", "2",
        "--max-steps", "2", "--batch-size", "2", "--learning-rate", "1e-3", "--eval-max-instances", "1",
        "--eval-sets", "none", "--no-eval-static",
        "--train-instances", "instances_train"])
    assert result.exit_code == 0, result.output
    run_dir = relay_workspace / "models" / "dpo+lora" / "tiny-relay" / "branching-programmatic"
    assert any(w.abs().sum() > 0 for w in lora_b(run_dir / "checkpoint-2").values()), "adapter unchanged"
    pairs = read_pairs(run_dir / "pairs-round-1.jsonl")
    assert pairs and all(p.has_ids and p.meta["chosen"]["reward"] > p.meta["rejected"]["reward"] for p in pairs)
    steps = steps_of(run_dir)
    assert [s["step"] for s in steps] == [1, 2]
    for key in ("train/loss", "memory/peak_rss_mb", "pairs/num", "rollout/percent_played", "rewards/margins"):
        assert key in steps[0], key
    assert steps[0]["memory/peak_rss_mb"] > 50
    assert list((relay_workspace / "playpen-records" / "dpo+lora").rglob("interactions.json"))
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["eval"]["games"][0]["game"] == "relay" and summary["pairs_per_round"] == [len(pairs)]


def test_dpo_from_recorded_play_via_playpen_run(tiny_workspace):
    result = CliRunner().invoke(cli, [
        "run", str(DPO_TRAINER), "-l", "tiny-random", "--source", "records", "--records", str(RUNS),
        "--games", "wordle", "--max-steps", "1", "--learning-rate", "1e-3", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    run_dir = tiny_workspace / "models" / "dpo+lora" / "tiny-random" / "records"
    assert any(w.abs().sum() > 0 for w in lora_b(run_dir / "checkpoint-1").values())
    (pair,) = read_pairs(run_dir / "pairs-round-1.jsonl")
    assert pair.meta["chosen"]["outcome"] == "success"
    # resuming a finished run trains nothing and keeps its checkpoint
    result = CliRunner().invoke(cli, [
        "run", str(DPO_TRAINER), "-l", "tiny-random", "--source", "records", "--records", str(RUNS),
        "--games", "wordle", "--max-steps", "1", "--no-evaluate", "--resume"])
    assert result.exit_code == 0, result.output
    assert "preference pairs" not in result.output and len(steps_of(run_dir)) == 1
    assert json.loads((run_dir / "playpen-run.json").read_text())["checkpoint"].endswith("checkpoint-1")


def test_spin_rounds_start_from_the_previous_adapter_and_resume(relay_workspace):
    from playpen.callbacks import BaseCallback
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name

    class StopAt(BaseCallback):
        def _on_train_step(self, step, metrics):
            return step < 3  # inside round 2: save a checkpoint and stop, like a Ctrl-C

    cls = trainer_class(SPIN_TRAINER)
    options = dict(games="relay", train_instances="instances_train", max_steps=4, rounds=2, pairs_per_round=2,
                   batch_size=2, learning_rate=1e-3, evaluate=False)
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    cls(learner, config=cls.config_class(**options), callbacks=[StopAt()], progress=False).learn(None)
    run_dir = relay_workspace / "models" / "spin+lora" / "tiny-random"
    assert (run_dir / "checkpoint-3").is_dir() and not (run_dir / "checkpoint-4").exists()
    end_of_round_1 = lora_b(run_dir / "checkpoint-2")
    assert any(w.abs().sum() > 0 for w in end_of_round_1.values())
    # round 2 started from round 1's adapter, kept as its reference
    reference = lora_b(run_dir / "reference-round-2")
    assert set(reference) == set(end_of_round_1)
    assert all(reference[n].equal(w) for n, w in end_of_round_1.items())
    assert (run_dir / "pairs-round-2.jsonl").exists()
    pairs = read_pairs(run_dir / "pairs-round-1.jsonl")
    assert all(p.meta["source"] == "spin" and p.chosen.split(":")[0] in ("WORD", "GUESS")
               and p.meta["model"] == "programmatic" for p in pairs)

    result = CliRunner().invoke(cli, ["run", str(SPIN_TRAINER), "-l", "tiny-random", "-L", "6", "--resume",
                                      *[f"--{k.replace('_', '-')}={v}" for k, v in options.items()
                                        if k != "evaluate"], "--no-evaluate"])
    assert result.exit_code == 0, result.output
    assert "round 2/2" in result.output and "round 1/2" not in result.output
    final = lora_b(run_dir / "checkpoint-4")
    assert any(not final[n].equal(end_of_round_1[n]) for n in final), "round 2 changed nothing"
    assert [s["step"] for s in steps_of(run_dir)] == [1, 2, 3, 4]
    assert all("memory/peak_rss_mb" in s and s["pairs/round"] == (1 if s["step"] <= 2 else 2)
               for s in steps_of(run_dir))


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("trainer, args, expected", [
    (DPO_TRAINER, ["--source", "bracnhing"], "unknown pair source 'bracnhing'. Did you mean: branching?"),
    (DPO_TRAINER, ["--source", "pairs", "--pairs-file", "EMPTY"], "holds no preference pairs"),
    (DPO_TRAINER, ["--source", "pairs", "--pairs-file", "MISSING"], "--source pairs needs --pairs-file FILE"),
    (DPO_TRAINER, ["--source", "records"], "--source records needs --records DIR"),
    (DPO_TRAINER, ["--branches", "1"], "option --branches: 1 is not valid"),
    (DPO_TRAINER, ["--fork-turns", "first"], "option --fork-turns: 'first' is not valid"),
    (DPO_TRAINER, ["--rounds", "3", "--max-steps", "2"], "--max-steps 2 is fewer than --rounds 3"),
    (DPO_TRAINER, ["--init-adapter", "FOREIGN"], "was trained on base model 'SomeOrg/other-model-7b'"),
    (SPIN_TRAINER, ["--init-adapter", "FOREIGN"], "was trained on base model 'SomeOrg/other-model-7b'"),
    (SPIN_TRAINER, ["--beta", "0"], "option --beta: 0.0 is not valid; expected a number > 0"),
])
def test_user_errors_one_line_nothing_written(foreign_adapter, relay_workspace, monkeypatch, trainer, args, expected):
    (relay_workspace / "empty.jsonl").write_text("\n")
    foreign_adapter(relay_workspace / "foreign")
    names = {"EMPTY": "empty.jsonl", "MISSING": "missing.jsonl", "FOREIGN": "foreign"}
    args = [names.get(a, a) for a in args]
    import playpen.models
    monkeypatch.setattr(playpen.models, "load_model_by_name",
                        lambda *a, **k: pytest.fail("a model was loaded before the options were checked"))
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-relay", "--games", "relay", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and result.output.count("\n") == 1, result.output
    assert not (relay_workspace / "models").exists() and not (relay_workspace / "playpen-records").exists()


def test_an_existing_run_is_never_overwritten(relay_workspace):
    run_dir = relay_workspace / "models" / "dpo+lora" / "tiny-random" / "records"
    (run_dir / "checkpoint-1").mkdir(parents=True)
    (run_dir / "checkpoint-1" / "trainer_state.json").write_text('{"global_step": 1}')
    result = CliRunner().invoke(cli, ["run", str(DPO_TRAINER), "-l", "tiny-random", "--source", "records",
                                      "--records", str(RUNS), "--games", "wordle"])
    assert result.exit_code == 2 and "already holds checkpoints" in result.output
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint-1"]
