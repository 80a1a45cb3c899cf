"""Batched rollouts: lock-step batching, exact tokens, partners, branching, errors."""
import json
import math

import pytest
import torch

from rollout_helpers import TRIMMING, GenerateSpy, make_learner

from playpen.errors import PlaypenError
from playpen.rollouts import Branching, InstanceRef, rollout


def _model_segments(trajectory):
    """[(start, end)] of the runs of model tokens in completion_ids."""
    segments, start = [], None
    for i, flag in enumerate(trajectory.env_mask + (0,)):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            segments.append((start, i))
            start = None
    return segments


def _responses_of(interactions, player_name):
    return [event["action"]["content"] for turn in interactions["turns"] for event in turn
            if event["from"] == player_name and event["action"]["type"] == "get message"]


def test_one_batched_generate_per_step(toy_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    result = rollout("sayword", make_learner(tiny_pair), num_repeats=2, records_dir=None, seed=0)
    assert len(result.episodes) == 8
    assert spy.batch_sizes == [8]  # 4 instances x 2 repeats, one turn each: ONE generate call
    assert result.stats.num_generate_calls == 1
    assert [(e.game_id, e.repeat) for e in result.episodes] == [(i, r) for i in range(4) for r in range(2)]
    groups = result.groups()
    assert [len(g) for g in groups.values()] == [2, 2, 2, 2]  # repeats of an instance share a group
    assert all(e.outcome in ("success", "failure") for e in result.episodes)
    assert result.stats.num_generated_tokens == sum(t.num_model_tokens for t in result.trajectories)


def test_trajectories_are_token_exact(toy_workspace, tiny_pair):
    learner = make_learner(tiny_pair, max_new_tokens=5)
    model, tokenizer = tiny_pair
    result = rollout("relay", learner, partners={"Listener": "programmatic"},
                     instances=lambda row: row["experiment"]["name"] == "lenient", seed=1)
    assert len(result.episodes) == 3
    for episode in result.episodes:
        assert episode.outcome == "aborted"  # random text: 1 + 3 re-prompts, then abort
        (trajectory,) = episode.trajectories
        assert trajectory.role == "Speaker" and trajectory.player_name == "Player 1"
        assert trajectory.num_turns == 4
        n = len(trajectory.completion_ids)
        assert len(trajectory.env_mask) == n and len(trajectory.logprobs) == n
        assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.env_mask) if not m)
        assert all(lp <= 0.0 for lp in trajectory.logprobs)
        segments = _model_segments(trajectory)
        assert len(segments) == 4
        # the game received exactly the decode of the generated ids (minus the closing EOS)
        interactions = json.loads((episode.path / "interactions.json").read_text())
        sent = _responses_of(interactions, "Player 1")
        for (start, end), text in zip(segments, sent):
            ids = list(trajectory.completion_ids[start:end])
            if ids[-1] == tokenizer.eos_token_id:
                ids = ids[:-1]
            assert tokenizer.decode(ids) == text
        # the whole sequence is the chat template of the conversation
        full = tokenizer.decode(list(trajectory.prompt_ids + trajectory.completion_ids))
        rendered = tokenizer.apply_chat_template(list(trajectory.messages), tokenize=False)
        assert rendered.startswith(full) and rendered[len(full):] in ("\n", "<|im_end|>\n")
        # logprobs are those of the model on exactly this sequence (temperature 1)
        ids = torch.tensor([list(trajectory.prompt_ids + trajectory.completion_ids)])
        with torch.no_grad():
            logits = model(ids).logits[0]
        logprobs = torch.log_softmax(logits.float(), -1)
        offset = len(trajectory.prompt_ids)
        for start, end in segments:
            for i in range(start, end):
                expected = logprobs[offset + i - 1, trajectory.completion_ids[i]].item()
                assert trajectory.logprobs[i] == pytest.approx(expected, abs=1e-3)


def test_self_play_records_both_players(toy_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    result = rollout("relay", make_learner(tiny_pair), records_dir=None,
                     instances=[InstanceRef("relay", "lenient", 0), InstanceRef("relay", "lenient", 1)])
    assert [e.game_id for e in result.episodes] == [0, 1]
    for episode in result.episodes:
        assert set(episode.models.values()) == {"tiny-random"}
        roles = {t.role for t in episode.trajectories}
        # the speaker always plays; the listener only once a WORD: line reached it
        assert "Speaker" in roles
    assert max(spy.batch_sizes) <= 2


def test_hf_teacher_partner_is_batched_separately(toy_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    teacher = make_learner(tiny_pair, temperature=0.0, name="teacher")
    result = rollout("relay", make_learner(tiny_pair), partners={"Speaker": teacher}, roles=["Listener"],
                     instances=lambda row: row["experiment"]["name"] == "lenient", records_dir=None)
    assert all(e.models == {"Player 1": "teacher", "Player 2": "tiny-random"} for e in result.episodes)
    assert all(t.role == "Listener" for t in result.trajectories)
    assert spy.batch_sizes[0] == 3  # the teacher speaks first, for all three episodes at once
    assert result.stats.num_generate_calls == len(spy.batch_sizes)


def test_continuous_batching_admits_new_episodes(toy_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    seen = []

    from playpen.callbacks import BaseCallback

    class Recorder(BaseCallback):
        def _on_rollout_start(self, num_episodes):
            seen.append(("start", num_episodes))

        def _on_episode_end(self, episode):
            seen.append(("end", episode.game_id))

    result = rollout("relay", make_learner(tiny_pair), partners={"Listener": "programmatic"},
                     instances=lambda row: row["experiment"]["name"] in ("lenient", "short"),
                     max_concurrent_episodes=2, records_dir=None, callbacks=Recorder())
    assert len(result.episodes) == 7
    assert max(spy.batch_sizes) <= 2
    assert seen[0] == ("start", 7) and len(seen) == 8
    # 'short' episodes abort after one turn; their slots are refilled at once, so the
    # number of steps is well below one step per learner turn
    assert len(spy.batch_sizes) < result.stats.num_learner_turns


def test_branching_makes_grpo_groups(toy_workspace, tiny_pair):
    result = rollout("sayword", make_learner(tiny_pair), branching=Branching(factor=4), seed=3,
                     instances=[InstanceRef("sayword", "words", 1), InstanceRef("sayword", "words", 2)])
    assert len(result.episodes) == 8
    groups = result.groups()
    assert len(groups) == 2 and all(len(g) == 4 for g in groups.values())
    for group in groups.values():
        assert len({t.prompt_ids for t in group}) == 1  # same start state
        assert sorted(t.branch_path for t in group) == [(0,), (1,), (2,), (3,)]
        assert len({t.parent_id for t in group}) == 1
    names = sorted(e.path.name for e in result.episodes)
    assert names[:4] == [f"instance_00001_b{i}" for i in range(4)]


def test_branching_mid_episode_shares_the_prefix(toy_workspace, tiny_pair):
    branching = Branching(factor=2, condition=lambda point: point.learner_turn == 1)
    result = rollout("relay", make_learner(tiny_pair), partners={"Listener": "programmatic"},
                     branching=branching, instances=[InstanceRef("relay", "lenient", 2)], seed=4)
    first, second = result.episodes
    assert (first.branch_path, second.branch_path) == ((0,), (1,))
    a, b = first.trajectories[0], second.trajectories[0]
    assert a.prompt_ids == b.prompt_ids
    first_turn_end = _model_segments(a)[1][0]  # start of the second model turn = the fork point
    assert a.completion_ids[:first_turn_end] == b.completion_ids[:first_turn_end]
    assert first.turns[0] == second.turns[0]


def test_unknown_role_and_unplayed_role_are_user_errors(toy_workspace, tiny_pair):
    learner = make_learner(tiny_pair)
    with pytest.raises(PlaypenError, match="unknown role or player 'Listner'.*Did you mean: Listener"):
        rollout("relay", learner, partners={"Listner": "programmatic"}, records_dir=None)
    with pytest.raises(PlaypenError, match="nobody plays role 'Listener'"):
        rollout("relay", learner, roles=["Speaker"], records_dir=None)
    with pytest.raises(PlaypenError, match="no such experiment/game_id"):
        rollout("relay", learner, instances=[InstanceRef("relay", "short", 99)], records_dir=None)


def test_game_errors_are_recorded_not_fatal(toy_workspace, tiny_pair, monkeypatch):
    from playpen.envs.game import GameEnv
    original = GameEnv.reset

    def flaky_reset(self, experiment, game_instance):
        if game_instance["game_id"] == 1:
            raise ValueError("broken instance")
        return original(self, experiment, game_instance)

    monkeypatch.setattr(GameEnv, "reset", flaky_reset)
    result = rollout("sayword", make_learner(tiny_pair))
    errors = [e for e in result.episodes if e.error]
    assert [e.game_id for e in errors] == [1] and errors[0].outcome == "error"
    assert "broken instance" in errors[0].error and result.stats.num_errors == 1
    assert (errors[0].path / "error.json").exists() and not (errors[0].path / "interactions.json").exists()
    with pytest.raises(ValueError, match="broken instance"):
        rollout("sayword", make_learner(tiny_pair), raise_game_errors=True, records_dir=None)


def test_trl_rollout_rows(toy_workspace, tiny_pair):
    result = rollout("sayword", make_learner(tiny_pair), records_dir=None)
    batch = result.as_trl_rollout()
    assert len(batch["prompt_ids"]) == 4 and set(batch["outcome"]) <= {"success", "failure"}
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
        assert all(isinstance(row, list) for row in batch[key])
    assert all(not math.isnan(r) for r in batch["reward"])


def test_instances_file(toy_workspace, tiny_pair):
    result = rollout("sayword", make_learner(tiny_pair, max_new_tokens=2), instances_file="instances_train",
                     records_dir=None)
    assert [(e.experiment, e.game_id) for e in result.episodes] == [("train_words", 0), ("train_words", 1)]
    with pytest.raises(PlaypenError, match=r"no in/nope.json \(instance files: instances, instances_train\)"):
        rollout("sayword", make_learner(tiny_pair), instances_file="nope", records_dir=None)


def test_context_window_overflow_fails_the_episode_and_short_room_cuts_the_turn(toy_workspace, tiny_pair,
                                                                                 monkeypatch):
    from playpen.inference.model_facts import context_limit
    model, tokenizer = tiny_pair
    assert context_limit(model, tokenizer) == 2048  # the tiny model's config; the tokenizer sets none
    learner = make_learner(tiny_pair, temperature=0.0, max_new_tokens=6)
    probe = rollout("sayword", learner, records_dir=None)
    lengths = sorted({len(t.prompt_ids) for t in probe.trajectories})
    longest = lengths[-1]
    assert all(t.num_model_tokens == 6 or t.completion_ids[-1] == tokenizer.eos_token_id
               for t in probe.trajectories)

    # room for 2 new tokens after the longest prompt: every turn is cut at 2 tokens (or ends earlier)
    monkeypatch.setattr(model.config, "max_position_embeddings", longest + 2)
    cut = rollout("sayword", learner, records_dir=None)
    assert not any(e.error for e in cut.episodes)
    assert all(t.num_model_tokens <= 2 for t in cut.trajectories if len(t.prompt_ids) == longest)
    same = [t for t in cut.trajectories if len(t.prompt_ids) == longest]
    assert same and all(t.num_model_tokens >= 1 for t in same)

    # no room at all: the episodes whose prompt fills the window fail with a clear error, the others play
    prompt_of = {t.game_id: len(t.prompt_ids) for t in probe.trajectories}
    monkeypatch.setattr(model.config, "max_position_embeddings", longest)
    result = rollout("sayword", learner, records_dir=None)
    failed = [e for e in result.episodes if e.error]
    assert sorted(e.game_id for e in failed) == sorted(g for g, n in prompt_of.items() if n >= longest)
    assert all(e.outcome == "error" and "context window holds" in e.error for e in failed)
    assert "ContextOverflowError" in failed[0].error
    assert result.stats.num_errors == len(failed)
    assert all(not e.error for e in result.episodes if prompt_of[e.game_id] < longest)


def test_a_template_that_breaks_the_prefix_on_a_games_messages_is_named_once(toy_workspace, tiny_pair, capsys,
                                                                               monkeypatch):
    from playpen.rollouts import chat
    monkeypatch.setattr(chat, "_CHECKED", set())  # earlier rollouts of this process checked relay already
    learner = make_learner(tiny_pair, max_new_tokens=5)
    lenient = dict(partners={"Listener": "programmatic"}, instances=[InstanceRef("relay", "lenient", 0)],
                   records_dir=None, seed=1)
    played = rollout("relay", learner, **lenient)
    (trajectory,) = played.trajectories
    replies = [m["content"] for m in trajectory.messages if m["role"] == "assistant"]
    assert trajectory.num_turns == 4 and any(r != r.strip() for r in replies[:-1])
    # SmolLM2's template: the turn-by-turn tokens are its render; checked once, nothing said
    assert "prefix-continuous" not in capsys.readouterr().out and len(chat._CHECKED) == 1

    learner.tokenizer.chat_template = TRIMMING
    assert chat.continuity_problem(learner.tokenizer) is None
    rollout("relay", learner, **lenient)
    rollout("relay", learner, **lenient)
    lines = [line for line in capsys.readouterr().out.splitlines() if "prefix-continuous" in line]
    assert len(lines) == 1, lines  # once per game and role, not per episode
    assert lines[0].startswith("[playpen] the chat template of tiny-random is not prefix-continuous on relay "
                               "(Speaker): after ")
