"""The rollout engine's typed values: how to sample, what to play, what came back.

Frozen dataclasses passed between the stages (planning, the lock-step loop, records,
trainers); see :mod:`playpen.rollouts` for the engine itself. :class:`SamplingConfig` is
the inference engine's (:mod:`playpen.inference.types`), re-exported here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from playpen.callbacks import EpisodeSummary
from playpen.inference.types import SamplingConfig

# The learner plays a role when a partner entry maps it to this value (or omits it).
LEARNER = "learner"


# ----------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class Learner:
    """The model being trained: any causal LM (PreTrainedModel or PeftModel) and its tokenizer.

    ``name`` is the model name written to records (``interactions.json``, run folder).
    ``adapter`` names the peft LoRA adapter that answers its turns (``"__base__"``: the
    adapter-free base); None answers with the model as it is (its active adapter). Players
    with adapters on ONE model object — this learner and partners given as Learners with
    adapters — are answered together in one batched ``generate`` per step (per-row
    ``adapter_names``), and every one of them gets trajectories (``Trajectory.model`` =
    its name).
    """

    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    name: str = "learner"
    sampling: SamplingConfig = SamplingConfig()
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``apply_chat_template`` arguments (clemcore's ``chat_template_kwargs``)."""
    adapter: Optional[str] = None

    @classmethod
    def from_clem(cls, clem_model: Any, sampling: Optional[SamplingConfig] = None) -> "Learner":
        """Wrap a clemcore ``HuggingfaceLocalModel`` (``.model``, ``.tokenizer``, gen args)."""
        if sampling is None:
            sampling = SamplingConfig.from_gen_args(getattr(clem_model, "gen_args", None))
        kwargs = dict(getattr(clem_model, "chat_template_kwargs", {}) or {})
        return cls(clem_model.model, clem_model.tokenizer, clem_model.name, sampling, kwargs)


@dataclass(frozen=True)
class InstanceRef:
    """One game instance: ``(game, experiment, game_id)`` as in ``instances.json``."""

    game: str
    experiment: str
    game_id: int


InstanceSelector = Union[None, Callable[[dict], bool], Sequence[InstanceRef]]
"""Which instances to play: None = all of each game's ``instances.json``; a predicate
over clemcore instance rows (``{"game_name", "experiment", "game_instance"}``); or an
explicit, ordered list of :class:`InstanceRef`."""


@dataclass(frozen=True)
class BranchPoint:
    """What a branching condition sees: a learner turn about to be generated."""

    game: str
    experiment: str
    game_id: int
    player_name: str
    role: str
    learner_turn: int
    """Index of this turn among the learner turns of this player in this episode (0 = first)."""
    depth: int
    """How many times this episode's ancestry has already forked."""


@dataclass(frozen=True)
class Branching:
    """Fork episodes at chosen learner turns into ``factor`` continuations.

    Only game state is copied (the game master, its players' memories, the records);
    model weights and tokenizers are shared. The default condition forks at the first
    learner turn of each episode, which turns one episode into a GRPO group of
    ``factor`` episodes sharing the prompt.
    """

    factor: int = 2
    condition: Callable[[BranchPoint], bool] = field(
        default=lambda point: point.learner_turn == 0 and point.depth == 0)
    max_depth: int = 1


# ----------------------------------------------------------------------------- partners

PartnerLike = Any
"""A partner for a role: ``"learner"`` (self-play), ``"programmatic"``/``"mock"`` (the
game's own programmatic player), a model name from the registry (loaded once), a
:class:`Learner` used as a frozen HF teacher (batched), any clemcore ``Model`` (API
backends run concurrently), or a :class:`playpen.rollouts.partners.Partner`."""



# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class TurnRecord:
    """One answered turn of one player (any responder), for inspection and datasets."""

    player_name: str
    role: str
    responder: str  # "learner" | "teacher" | "programmatic"
    context: str
    response: str
    num_new_tokens: int = 0


@dataclass(frozen=True)
class SideCall:
    """A model call a game master made inside a step (not a turn of the dialogue): who was
    asked, by whom answered, what the model was given and what it said."""

    player_name: str
    role: str
    responder: str  # "learner" | "teacher" | the partner's name
    messages: tuple[dict, ...]
    response: str
    num_new_tokens: int = 0


@dataclass(frozen=True)
class Trajectory:
    """The learner's token-exact view of one (episode, player), ready for TRL.

    ``prompt_ids`` is the chat-templated first prompt (ending with the generation
    prompt). ``completion_ids`` is everything after it, exactly as the model saw it:
    its own turns (each ending with the EOS it generated) and the chat-templated game
    messages between them. ``env_mask[i]`` is 1 for a model token and 0 for an
    environment token; ``logprobs[i]`` is the sampling logprob of a model token and 0.0
    for an environment token. The text the game received for each turn is
    ``tokenizer.decode`` of that turn's model tokens without the final EOS.
    """

    episode_id: str
    game: str
    experiment: str
    game_id: int
    repeat: int
    player_name: str
    role: str
    model: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    num_turns: int
    outcome: str
    main_score: float
    reward: float
    group_id: str
    """Episodes with the same group_id started from the same state (same instance for
    repeats; the same fork point for branches): the unit of GRPO advantages."""
    parent_id: Optional[str] = None
    branch_path: tuple[int, ...] = ()
    """Index of the branch taken at each fork of this episode's ancestry (root: ())."""
    segment: int = 0
    """0 unless the game rewrote this player's history mid-episode; then a new segment
    (a new prompt) starts and the earlier tokens are in segment - 1."""
    messages: tuple[dict, ...] = ()
    """The same conversation as chat messages (system messages excluded)."""
    side_call: Optional[int] = None
    """None for the player's turns; for a side call (the game master called the player's
    model inside a step, e.g. a probing question it does not keep in the dialogue), the
    index of that call in :attr:`EpisodeResult.side_calls`: one prompt, one completion."""
    level: int = 0
    """Depth in an episode hierarchy (docs/hierarchical.md): 0 for a top-level episode, 1 for
    an episode it started, ..."""
    episode_type: str = ""
    """What kind of episode in a hierarchy (its game name unless the task names it)."""
    trainable: bool = True
    """False when the task marks this level as played but not trained (e.g. frozen solvers)."""
    policy_version: int = 0
    """The optimizer step of the policy that produced it (see :mod:`playpen.training.grpo.offpolicy`)."""

    @property
    def num_model_tokens(self) -> int:
        return sum(self.env_mask)

    def as_trl_row(self) -> dict:
        """One row of a TRL ``rollout_func`` result (lists, as TRL expects)."""
        return {"prompt_ids": list(self.prompt_ids), "completion_ids": list(self.completion_ids),
                "logprobs": list(self.logprobs), "env_mask": list(self.env_mask)}


@dataclass(frozen=True)
class EpisodeResult:
    """A finished (or failed) episode."""

    episode_id: str
    game: str
    experiment: str
    game_id: int
    repeat: int
    outcome: str  # "success" | "failure" | "aborted" | "error"
    main_score: float  # NaN when aborted or unscored
    rewards: Mapping[str, float]  # per player name
    roles: Mapping[str, str]  # player name -> game role
    models: Mapping[str, str]  # player name -> model name
    num_turns: int
    turns: tuple[TurnRecord, ...]
    trajectories: tuple[Trajectory, ...]
    episode_scores: Mapping[str, Any] = field(default_factory=dict)
    group_id: str = ""
    parent_id: Optional[str] = None
    branch_path: tuple[int, ...] = ()
    path: Optional[Path] = None  # the episode folder, when records were written
    error: Optional[str] = None  # "ExceptionType: message" when the game raised
    side_calls: tuple[SideCall, ...] = ()  # model calls the game master made inside its steps

    def summary(self) -> EpisodeSummary:
        return EpisodeSummary(game=self.game, experiment=self.experiment, game_id=self.game_id,
                              outcome=self.outcome, main_score=self.main_score,
                              rewards=dict(self.rewards), num_turns=self.num_turns,
                              path=str(self.path) if self.path else None)


@dataclass(frozen=True)
class RolloutStats:
    """Throughput and where the time went (seconds are wall clock)."""

    num_episodes: int = 0
    num_errors: int = 0
    num_learner_turns: int = 0
    num_generated_tokens: int = 0
    """Learner + HF-teacher tokens generated (up to and including EOS; no padding)."""
    num_generate_calls: int = 0
    num_side_calls: int = 0
    """Model calls game masters made inside their steps (served batched, recorded)."""
    seconds_total: float = 0.0
    seconds_setup: float = 0.0
    """Loading games and partners, probing roles (part of seconds_total)."""
    seconds_generate: float = 0.0
    seconds_partners: float = 0.0
    seconds_env: float = 0.0
    """Game masters, templating, bookkeeping, records: the loop's time outside the models."""
    num_prefill_tokens: int = 0
    """Prompt tokens of the learner's turns run through the model (padding excluded)."""
    num_reused_tokens: int = 0
    """Prompt tokens of the learner's turns whose KV cache was reused (kept from an earlier
    turn, or a prefix shared within a batch) instead of prefilled."""
    num_branch_points: int = 0
    """Learner turns at which episodes were forked (with ``branching``; 0 when every episode
    ended before a turn the condition chose)."""

    @property
    def episodes_per_s(self) -> float:
        return self.num_episodes / self.seconds_total if self.seconds_total else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.num_generated_tokens / self.seconds_total if self.seconds_total else 0.0

    @property
    def env_share(self) -> float:
        """Share of the loop's time (total minus setup) spent outside the models."""
        loop = self.seconds_total - self.seconds_setup
        return self.seconds_env / loop if loop > 0 else 0.0

    def as_metrics(self) -> dict[str, float]:
        return {"rollout/episodes": self.num_episodes, "rollout/errors": self.num_errors,
                "rollout/episodes_per_s": self.episodes_per_s, "rollout/tokens_per_s": self.tokens_per_s,
                "rollout/generated_tokens": self.num_generated_tokens,
                "rollout/env_share": self.env_share, "rollout/seconds": self.seconds_total,
                "rollout/seconds_setup": self.seconds_setup, "rollout/side_calls": self.num_side_calls,
                "rollout/prefill_tokens": self.num_prefill_tokens, "rollout/reused_tokens": self.num_reused_tokens,
                "rollout/branch_points": self.num_branch_points}


@dataclass(frozen=True)
class RolloutResult:
    """All episodes of one rollout call, in request order (instance, repeat, branch path)."""

    episodes: tuple[EpisodeResult, ...]
    stats: RolloutStats
    run_dir: Optional[Path] = None  # the results folder (give it to `clem score`), if written

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for e in self.episodes for t in e.trajectories]

    def groups(self) -> dict[str, list[Trajectory]]:
        """Trajectories by ``group_id`` (insertion ordered)."""
        out: dict[str, list[Trajectory]] = {}
        for t in self.trajectories:
            out.setdefault(t.group_id, []).append(t)
        return out

    def as_trl_rollout(self, trajectories: Optional[Sequence[Trajectory]] = None) -> dict[str, list]:
        """TRL ``rollout_func`` output: ``prompt_ids``, ``completion_ids``, ``logprobs``,
        ``env_mask`` plus per-row extra fields ``reward``, ``outcome``, ``main_score``,
        ``role``, ``game``, ``group_id`` (forwarded by TRL to reward functions)."""
        rows = list(self.trajectories if trajectories is None else trajectories)
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask",
                                                "reward", "outcome", "main_score", "role", "game",
                                                "group_id")}
        for t in rows:
            for k, v in t.as_trl_row().items():
                out[k].append(v)
            out["reward"].append(t.reward)
            out["outcome"].append(t.outcome)
            out["main_score"].append(t.main_score)
            out["role"].append(t.role)
            out["game"].append(t.game)
            out["group_id"].append(t.group_id)
        return out

