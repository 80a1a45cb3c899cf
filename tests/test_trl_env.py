"""playpen's games as TRL environments (playpen.envs.trl_env): the environment plays an episode
as playpen's own rollout does, turn for turn and reward for reward, and stock TRL's
GRPOTrainer(environment_factory=...) trains on it."""
import json

import pytest

from playpen.envs.trl_env import GameEnvironment, environment_factory, instance_rows
from playpen.errors import RolloutError
from playpen.outcomes import EpisodeOutcome
from playpen.rewards import OutcomeReward
from rollout_helpers import make_learner

TOOL_CALL = '<tool_call>\n{"name": "say", "arguments": {"text": "yes"}}\n</tool_call><|im_end|>'


def replay(factory, episode) -> tuple[GameEnvironment, list[str]]:
    """Play the instance of a rollout's episode in a TRL environment with the learner's replies
    of that episode; returns the environment and the messages it showed the learner."""
    env = factory()
    shown = [env.reset(experiment=episode.experiment, game_id=episode.game_id)]
    for turn in episode.turns:
        if turn.responder == "learner":
            shown.append(env.say(turn.response))
    return env, shown


@pytest.mark.parametrize("game, roles, partners", [
    ("relay", ["Listener"], {"Speaker": "programmatic"}),  # the learner answers second, after a partner
    ("sayword", None, None),
    ("taboo", ["Guesser"], {"Describer": "programmatic"}),  # playpen's own game, seated as docs/interop.md seats it
])
def test_the_environment_plays_as_playpens_rollout(toy_workspace, tiny_pair, game, roles, partners):
    from playpen.rollouts import rollout
    result = rollout([game], make_learner(tiny_pair, max_new_tokens=8), roles=roles, partners=partners,
                     records_dir=None, seed=0)
    factory = environment_factory(game, roles[0] if roles else None, partners)
    assert len(result.episodes) >= 4
    for episode in result.episodes:
        learner = next(name for name, role in episode.roles.items() if roles is None or role in roles)
        env, shown = replay(factory, episode)
        contexts = [turn.context for turn in episode.turns if turn.responder == "learner"]
        assert shown[0].endswith(contexts[0]) and shown[1:-1] == contexts[1:]
        assert shown[-1] == f"The game is over: {episode.outcome}."
        assert env.get_reward() == episode.rewards[learner], (episode.episode_id, episode.outcome)


def test_a_won_episode_is_rewarded_as_playpen_rewards_it(toy_workspace, tiny_pair):
    """The programmatic Listener's replies, given by the policy: relay is won in round one."""
    from playpen.rollouts import rollout
    result = rollout(["relay"], make_learner(tiny_pair), partners={"Speaker": "programmatic",
                                                                     "Listener": "programmatic"}, records_dir=None)
    factory = environment_factory("relay", "Listener", {"Speaker": "programmatic"})
    for episode in result.episodes:
        env = factory()
        env.reset(experiment=episode.experiment, game_id=episode.game_id)
        for turn in episode.turns:
            if turn.role == "Listener":
                env.say(turn.response)
        assert episode.outcome == "success"
        assert env.get_reward() == episode.rewards["Player 2"] == OutcomeReward()(
            EpisodeOutcome("success", episode.main_score))


def test_playpens_taboo_is_won_by_saying_the_target(toy_workspace):
    """docs/interop.md's call on a game playpen ships: the programmatic Describer's first clue is
    the learner's first prompt, and a guess of the target word wins it."""
    rows = instance_rows("taboo", "instances_train")
    env = environment_factory("taboo", "Guesser", {"Describer": "programmatic"}, instances="instances_train")()
    assert "moving pictures" in env.reset(**rows[0])  # high_en/0: the target is "movie"
    assert env.say("GUESS: movie") == "The game is over: success."
    assert env.get_reward() == 1.0


def test_unfinished_and_finished_episodes(toy_workspace):
    env = environment_factory("sayword", max_turns=0)()
    assert env.reset(experiment="words", game_id=0) == "Reply with the single word: yes"
    assert env.get_reward() == OutcomeReward().aborted  # the policy never answered
    assert env.say(" Yes. ") == "The game is over: success."
    assert env.get_reward() == 1.0
    with pytest.raises(RuntimeError, match="the game is over"):
        env.say("yes")
    with pytest.raises(RolloutError, match="game 'sayword' has no instance experiment='words' game_id=9"):
        env.reset(experiment="words", game_id=9)
    # no instance named: the file's instances in turn
    assert [env.reset() for _ in range(5)][-1] == "Reply with the single word: yes"
    assert instance_rows("sayword", "instances_train") == [
        {"prompt": [{"role": "user", "content": ""}], "experiment": "train_words", "game_id": i} for i in (0, 1)]


def test_seating_mistakes_are_one_clear_error(toy_workspace):
    with pytest.raises(RolloutError, match="nobody plays role 'Speaker'"):
        environment_factory("relay", "Listener")
    with pytest.raises(RolloutError, match="no role or player 'Guesser'"):
        environment_factory("relay", "Guesser", {"Speaker": "programmatic"})
    with pytest.raises(RolloutError, match="every role has a partner"):
        environment_factory("relay", partners={"Speaker": "programmatic", "Listener": "programmatic"})
    with pytest.raises(RolloutError, match="'Speaker' is the learner's"):
        environment_factory("relay", "Speaker", {"Speaker": "programmatic"})
    # one partner for every other seat; no learner_role: the first seat
    env = environment_factory("relay", partners="programmatic")()
    assert "secret word 'apple'" in env.reset(experiment="short", game_id=0)


def tool_calling_tokenizer(model_dir):
    """The SmolLM2 tokenizer with Qwen2.5's chat template: SmolLM2's own cannot render tool calls,
    and TRL parses tool calls only for the templates it knows; both use <|im_start|>/<|im_end|>."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def test_a_tool_call_as_trl_parses_it_plays_the_turn(toy_workspace, tiny_model_dir):
    """The tool schema TRL renders from say(), and a policy's tool call parsed by the parser TRL
    sets up, dispatched by name as TRL's tool loop does: the game is won."""
    from trl.chat_template_utils import add_response_schema
    tokenizer = add_response_schema(tool_calling_tokenizer(tiny_model_dir))
    env = environment_factory("sayword")()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": env.reset(experiment="words", game_id=0)}],
                                           tools=[env.say], add_generation_prompt=True, tokenize=False)
    assert '"name": "say"' in prompt and '"required": ["text"]' in prompt
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(TOOL_CALL, add_special_tokens=False)["input_ids"]
    message = tokenizer.parse_response(completion_ids, prefix=prompt_ids, tools=[env.say])
    tools = {name: getattr(env, name) for name in dir(type(env))
             if not name.startswith("_") and name not in ("reset", "get_reward")}
    assert sorted(tools) == ["say"]  # TRL offers every other public method as a tool
    (call,) = message["tool_calls"]
    assert tools[call["function"]["name"]](**call["function"]["arguments"]) == "The game is over: success."
    assert env.get_reward() == 1.0


def test_stock_grpo_trainer_runs_on_a_game(toy_workspace, tiny_model_dir, monkeypatch):
    """TRL's own trainer with environment_factory and nothing of playpen's training: two steps, the
    environment's reward logged as TRL's reward column. The random tiny policy never calls say()
    (a working tool call takes a model trained for it), so every episode is left unfinished and
    worth the aborted reward."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    rows = [row for row in instance_rows("sayword") if row["game_id"] == 0]  # the word "yes"
    args = GRPOConfig(output_dir=str(toy_workspace / "out"), max_steps=2, learning_rate=1e-3, num_generations=2,
                      per_device_train_batch_size=2, max_completion_length=16, logging_steps=1,
                      save_strategy="no", report_to="none", seed=0, disable_tqdm=True, use_cpu=True,
                      max_tool_calling_iterations=2, gradient_checkpointing=False, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tool_calling_tokenizer(tiny_model_dir),
                          train_dataset=Dataset.from_list(rows), environment_factory=environment_factory("sayword"))
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/GameEnvironment/mean" in h]
    assert len(logs) == 2, json.dumps(trainer.state.log_history)
    assert all(h["rewards/GameEnvironment/mean"] == OutcomeReward().aborted for h in logs)
    assert all("tools/call_frequency" in h for h in logs)
