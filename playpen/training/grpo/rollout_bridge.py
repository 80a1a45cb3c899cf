"""GRPO over dialogue games: the bridge between playpen's rollout engine and TRL's
``GRPOTrainer(rollout_func=...)``.

TRL's unit of advantage is a *group*: ``num_generations`` consecutive rows sharing a
prompt. Here a group is one **slot** — a training instance and the role trained on it —
and its rows are that role's trajectories in ``num_generations`` episodes of the
instance. The dataset handed to TRL has one row per slot whose prompt is the slot key
(JSON); TRL's sampler repeats it ``num_generations`` times, and :class:`GameRollout`
plays the episodes and returns each role's token-exact trajectory (game-master and
partner tokens masked out by ``env_mask``).

In self-play the learner plays every role, so the slots of one instance are served by
the SAME episodes: the dataset keeps an instance's role slots adjacent (in a seeded
shuffle of instances) so that they land in one generation batch. With a partner (a
teacher, a past checkpoint: each group draws one from the mix of ``--partners``), each
slot is played separately with the partner in the other roles.

Rewards: one TRL reward function per role (``role:<R>``, None for other roles' rows), so
that TRL logs each role's mean/std and each row is trained with its own role's reward;
``played`` (weight 0) logs the share of non-aborted episodes. What a run builds from these
(the dataset, the partner mix, the advantages): :mod:`playpen.training.grpo.assembly`.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping, Optional, Sequence

from playpen.distributed import any_rank, generating_model
from playpen.envs.loading import game_roles
from playpen.errors import GRPOSetupError
from playpen.registry import TRAIN_INSTANCES, close_matches
from playpen.rollouts import InstanceRef, rollout
from playpen.rollouts.types import Learner
from playpen.training.grpo.mixes import PartnerMix
from playpen.training.grpo.watch import PolicyWatch, rollout_health
from playpen.training.rubrics.files import merged_metrics


@dataclass(frozen=True)
class Slot:
    """A GRPO group: an instance of a game and the role (or player name) trained on it."""

    game: str
    experiment: str
    game_id: int
    role: str

    def to_prompt(self) -> list[dict]:
        return [{"role": "user", "content": json.dumps(asdict(self), sort_keys=True)}]

    @classmethod
    def from_prompt(cls, prompt) -> "Slot":
        content = prompt[-1]["content"] if isinstance(prompt, list) else prompt
        return cls(**json.loads(content))

    @property
    def instance(self) -> tuple:
        return self.game, self.experiment, self.game_id


def training_slots(games: Sequence[str], roles: Sequence[str] = (), instances: str = TRAIN_INSTANCES,
                   items: Optional[Mapping[str, Sequence[str]]] = None) -> tuple[list[list[Slot]], dict[str, list[str]]]:
    """Per training instance, the slots of the roles to train (``roles`` empty = all);
    and every game's roles. `items`: game -> the instances to train on (a ``--split``,
    :attr:`~playpen.training.common.config.SplitOptions.train_items`); None: all of the file."""
    per_instance, all_roles = [], {}
    for game in games:
        names, rows = game_roles(game, instances, None if items is None else items[game])
        all_roles[game] = names
        chosen = [n for n in names if not roles or n in roles]
        if not chosen:
            continue
        for row in rows:
            per_instance.append([Slot(game, row["experiment"]["name"], int(row["game_instance"]["game_id"]), r)
                                 for r in chosen])
    known = sorted({r for names in all_roles.values() for r in names})
    unknown = [r for r in roles if r not in known]
    if unknown:
        raise GRPOSetupError(f"unknown role '{unknown[0]}'.{close_matches(unknown[0], known)} "
                             f"Roles of {', '.join(games)}: {', '.join(known)}")
    if not per_instance:
        raise GRPOSetupError(f"no training slots for games {', '.join(games)} and roles {', '.join(roles)}")
    return per_instance, all_roles


def slot_dataset(per_instance: list[list[Slot]], num_rows: int, seed: int):
    """A ``datasets.Dataset`` with a ``prompt`` column: seeded passes over the shuffled
    instances, an instance's role slots adjacent, at least ``num_rows`` rows."""
    from datasets import Dataset
    rng = random.Random(seed)
    rows: list[dict] = []
    while len(rows) < num_rows:
        order = list(per_instance)
        rng.shuffle(order)
        for slots in order:
            rows += [{"prompt": s.to_prompt()} for s in slots]
    return Dataset.from_list(rows)


# ----------------------------------------------------------------------------- rewards

def reward_functions(roles: Sequence[str]) -> tuple[list[Callable], list[float]]:
    """One reward function per role (its rows' rewards, None elsewhere) plus ``played``
    (weight 0: logged, not optimised). Returns the functions and their weights."""
    funcs, weights = [], []
    for role in roles:
        def role_reward(prompts, completions, reward, role, _role=role, **kwargs):
            return [None if r != _role or value is None or math.isnan(value) else float(value)
                    for value, r in zip(reward, role)]
        role_reward.__name__ = f"role:{role}"
        funcs.append(role_reward)
        weights.append(1.0)

    def played(prompts, completions, outcome, reward, **kwargs):
        # rows of a role that never got a turn stay unscored (out of every mean)
        return [None if o == "error" or value is None or math.isnan(value) else float(o != "aborted")
                for o, value in zip(outcome, reward)]
    funcs.append(played)
    weights.append(0.0)
    return funcs, weights


# ----------------------------------------------------------------------------- rollout_func

class GameRollout:
    """TRL ``rollout_func``: plays the episodes that the prompts (slot keys) ask for.

    Args:
        learner_name: the name written to records.
        tokenizer: the learner's tokenizer.
        num_generations: TRL's group size (episodes per slot).
        game_roles: every game's roles (from :func:`training_slots`).
        teacher: None for self-play, else the partner of the learner in every other role
            (anything :data:`playpen.rollouts.PartnerLike` accepts); ignored with ``mix``.
        mix: a :class:`playpen.training.grpo.mixes.PartnerMix`: each group draws its partner.
        augment: apply the games' rollout augmentations (referencegame: grid order per episode).
        augment_variants: with ``augment``, the draws a group's episodes share (0: one per episode).
        sampling: the learner's :class:`playpen.rollouts.SamplingConfig`.
        records_dir: where each call's run folder of clemcore-layout records goes.
        callbacks: playpen callbacks (episodes are reported to them).
        reward_fn: ``(EpisodeOutcome, player_name, role) -> float`` (default: outcome reward).
    """

    def __init__(self, learner_name: str, tokenizer: Any, *, num_generations: int,
                 game_roles: dict[str, list[str]], teacher: Any = None, sampling: Any = None,
                 records_dir: Any = None, callbacks: Any = None, reward_fn: Optional[Callable] = None,
                 max_concurrent_episodes: int = 16, instances: str = TRAIN_INSTANCES, seed: int = 0,
                 mix: Any = None, augment: bool = False, rubric: Any = None, augment_variants: int = 0,
                 learning_rate: float = 0.0):
        self.learner_name = learner_name
        self.tokenizer = tokenizer
        self.num_generations = num_generations
        self.game_roles = game_roles
        self.teacher = teacher
        self.sampling = sampling
        self.records_dir = records_dir
        self.callbacks = callbacks
        self.reward_fn = reward_fn
        self.max_concurrent_episodes = max_concurrent_episodes
        self.instances = instances
        self.seed = seed
        self.mix = mix or PartnerMix({"teacher": 1.0} if teacher is not None else {"self": 1.0},
                                     {"teacher": teacher, "self": "learner"})
        self.augment = augment
        self.augment_variants = augment_variants
        self.rubric = rubric  # a Rubric (--rubric): its game's episodes rescored after each rollout
        self.last_rows: dict[str, list] = {}
        self.last_metrics: dict[str, float] = {}
        self.num_calls = 0
        self.watch = PolicyWatch(learning_rate, sampling=sampling)  # do the rollouts come from the weights being trained?

    # TRL calls this with the generation batch's prompts (each slot repeated G times)
    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        group = self.num_generations
        if len(prompts) % group:
            raise ValueError(f"rollout_func got {len(prompts)} prompts, not a multiple of "
                             f"num_generations={group}")
        slots = [Slot.from_prompt(prompts[i]) for i in range(0, len(prompts), group)]
        for i, slot in enumerate(slots):
            if any(Slot.from_prompt(p) != slot for p in prompts[i * group:(i + 1) * group]):
                raise ValueError("rollout_func: a group's prompts differ; TRL's sampler must repeat "
                                 "each prompt num_generations times consecutively")
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        names = self.mix.assign(step * len(slots), len(slots))
        with generating_model(trainer) as model:  # out of its DDP wrapper
            learner = Learner(model, self.tokenizer, self.learner_name, self.sampling)
            episodes = self._play(learner, slots, names, step, trainer.model)
            watched = self.watch.check(model, step)  # after the rollout: what vLLM was handed for it
        self.num_calls += 1
        out = self._rows(slots, names, episodes)
        self.last_metrics.update(watched)
        self.last_metrics.update(rollout_health(out["outcome"], out["num_turns"]))
        # TRL would take a step on nothing. The step trains on every rank's rows together, so
        # it stops only when no rank has a trainable turn (a rank whose slots all ended before
        # the role spoke contributes masked rows, as a group of such episodes does on one rank);
        # every rank calls this once per step, so the collective is matched
        if not any_rank(any(any(mask) for mask in out["env_mask"])):
            raise GRPOSetupError(
                f"GRPO step {step + 1}: the trained role(s) {', '.join(sorted({s.role for s in slots}))} of "
                f"{', '.join(sorted({s.game for s in slots}))} produced no trainable turns in "
                f"{len(out['env_mask'])} episode(s) (outcomes: {', '.join(sorted(set(out['outcome'])))}): "
                f"every episode ended before the role spoke")
        self.last_rows = {key: out[key] for key in ("reward", "role", "game", "logprobs")}
        self.last_rows["policy_version"] = [step] * len(out["reward"])
        for name in self.mix.weights:
            self.last_metrics[f"partners/{name}"] = names.count(name) / len(names)
        return out

    def _play(self, learner, slots: list[Slot], names: list[str], step: int, model) -> dict:
        """Episodes by (instance, role, partner name); self-play slots of an instance share them."""
        calls: list[tuple[list, Optional[dict], Optional[list], str]] = []
        for name in dict.fromkeys(names):
            mine = [s for s, n in zip(slots, names) if n == name]
            partner = self.mix.partner(name, model, step)
            if partner == "learner":
                refs = list(dict.fromkeys(s.instance for s in mine))
                calls.append(([InstanceRef(*i) for i in refs], None, None, name))
                continue
            for role in dict.fromkeys(s.role for s in mine):
                by_game: dict[str, list] = {}
                for s in mine:
                    if s.role == role:
                        by_game.setdefault(s.game, []).append(s.instance)
                for game, instances in by_game.items():
                    others = {r: partner for r in self.game_roles[game] if r != role}
                    calls.append(([InstanceRef(*i) for i in dict.fromkeys(instances)], others, [role], name))
        found: dict[tuple, list] = {}
        stats, scores = [], []
        for refs, partners, roles, name in calls:
            games = list(dict.fromkeys(r.game for r in refs))
            result = rollout(games, learner, roles=roles, partners=partners, instances=refs,
                             instances_file=self.instances, num_repeats=self.num_generations,
                             max_concurrent_episodes=self.max_concurrent_episodes,
                             reward_fn=self.reward_fn, records_dir=self.records_dir,
                             callbacks=self.callbacks, seed=self.seed * 100003 + step, augment=self.augment,
                             augment_variants=self.augment_variants)
            stats.append(result.stats)
            if self.rubric is not None:  # per-player rewards of the rubric's game (judges batched per call)
                result = self.rubric.apply(result, policy=learner.model)
                scores.append(self.rubric.last_scores)
            for episode in result.episodes:
                key = (episode.game, episode.experiment, episode.game_id)
                for slot_role in (roles or self.game_roles[episode.game]):
                    found.setdefault((key, slot_role, name), []).append(episode)
        self.last_metrics = _merge_stats(stats)
        if scores:
            self.last_metrics.update(merged_metrics(scores))
        return found

    def _rows(self, slots: list[Slot], names: list[str], episodes: dict) -> dict[str, list]:
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask",
                                                "reward", "outcome", "main_score", "role", "game", "num_turns")}
        eos = self.tokenizer.eos_token_id
        for slot, name in zip(slots, names):
            played = episodes.get((slot.instance, slot.role, name), [])[:self.num_generations]
            for episode in played:
                # the role never got a turn (the episode ended or failed before it): an empty row
                append_row(out, _pick(episode, slot.role), eos)
                out["outcome"].append(episode.outcome)
                out["num_turns"].append(float(episode.num_turns))
                out["main_score"].append(float(episode.main_score))
                out["role"].append(slot.role)
                out["game"].append(slot.game)
            if len(played) != self.num_generations:
                raise RuntimeError(f"slot {slot}: {len(played)} episodes for a group of "
                                   f"{self.num_generations}")
        return out


def append_row(out: dict, trajectory, eos: int) -> None:
    """Append ``trajectory``'s TRL row and reward to ``out``; for None (no turn to learn from)
    a row of one masked EOS and a NaN reward, so that it stays out of every group's baseline."""
    if trajectory is None:
        for key, value in (("prompt_ids", [eos]), ("completion_ids", [eos]), ("logprobs", [0.0]),
                           ("env_mask", [0])):
            out[key].append(value)
        out["reward"].append(math.nan)
        return
    for key, value in trajectory.as_trl_row().items():
        out[key].append(value)
    out["reward"].append(float(trajectory.reward))


def _pick(episode, role: str):
    """The episode's trajectory for `role`: the longest segment (a game that rewrites a
    player's history mid-episode splits it into segments). A player heard only in side
    calls (a master that asks its model inside its steps, as clembench's privateshared
    does) has no turn: then its longest side call is what it said, and the row."""
    mine = [t for t in episode.trajectories if role in (t.role, t.player_name)]
    candidates = [t for t in mine if t.side_call is None] or mine
    if not candidates:
        return None
    return max(candidates, key=lambda t: (t.num_model_tokens, -t.segment, -(t.side_call or 0)))


def _merge_stats(stats: list) -> dict[str, float]:
    if not stats:
        return {}
    seconds = sum(s.seconds_total for s in stats)
    tokens = sum(s.num_generated_tokens for s in stats)
    episodes = sum(s.num_episodes for s in stats)
    return {"rollout/episodes": episodes, "rollout/errors": sum(s.num_errors for s in stats),
            "rollout/seconds": seconds, "rollout/generated_tokens": tokens,
            "rollout/tokens_per_s": tokens / seconds if seconds else 0.0,
            "rollout/episodes_per_s": episodes / seconds if seconds else 0.0}
