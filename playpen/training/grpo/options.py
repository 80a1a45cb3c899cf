"""The options of a GRPO run over games and their checks: :class:`GRPOOptions` (the groups, the
reward, the options against collapse and forgetting: ``--baseline``, ``--partners``, ``--past-every``,
``--game-shares``, ``--augment``, ``--rubric``, ``--sft-coef``) and

- :func:`validate_options`: values, when the config is built;
- :func:`check`: names (partner models, games, an init adapter's base model, chance
  levels), once the model names are known and before any model loads.

What a run builds from them: :mod:`playpen.training.grpo.assembly`; docs/trainers.md says
when to use each option.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from playpen.envs.loading import game_roles
from playpen.errors import TrainingSetupError
from playpen.registry import close_matches
from playpen.training.common.config import option, split_list
from playpen.training.grpo.advantages import BASELINES
from playpen.training.grpo.watch import STOP_HELP
from playpen.training.grpo.mixes import chance_level, check_game_shares, check_partners, parse_weights
from playpen.training.grpo.objective import ObjectiveOptions, validate_objective
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.rubrics.files import RUBRIC_HELP, check_rubric_option


@dataclass
class GRPOOptions(ObjectiveOptions):
    """GRPO over games (also sets GRPO's own defaults of the run and LoRA options)."""

    roles: str = option("", "roles to train (comma-separated; empty = all)")
    num_generations: int = option(4, "group size: episodes per instance and role")
    groups_per_step: int = option(2, "groups (instance x role) per optimizer step")
    beta: float = option(0.02, "KL coefficient (0 = no KL, no reference pass)")
    init_adapter: str = option("", "start from this adapter (e.g. an SFT checkpoint)")
    reward: str = option("outcome", "outcome (graded) or binary (1 = success)")
    max_concurrent_episodes: int = option(16, "episodes generated together")
    max_steps: int = option(50, "optimizer steps")
    learning_rate: float = option(5e-5, "learning rate")
    lora_dropout: float = option(0.0, "LoRA dropout, also applied to --init-adapter (0: none, as RL wants; "
                                      "it costs CPU time too)")
    partners: str = option("", "partner mix NAME:WEIGHT,... of self, past, teacher (-t), programmatic or a "
                               "registered model (empty: the trainer's own partner)")
    past_every: int = option(5, "with past in --partners: snapshot the learner every N steps (last 4 kept)")
    game_shares: str = option("", "GAME:SHARE,... of the groups (sum 1; replaces --games); empty: every "
                                  "training instance of --games alike")
    augment: bool = option(True, "apply the rollout augmentations a game declares (referencegame: the grid "
                                 "order shuffled per episode)")
    augment_variants: int = option(0, "with --augment: 0 = every episode its own draw; N = a group's episodes "
                                      "share N draws (episode r plays draw r mod N), so that the episodes of a "
                                      "draw share their prompt and --share-prompts runs it once")
    rubric: str = option("", RUBRIC_HELP)
    sft_coef: float = option(0.0, "weight of a supervised loss on demonstration turns (the programmatic players' "
                                  "won training episodes, of the trained roles) added to every step: teaches what "
                                  "rollouts rarely find and keeps the format (0 = none)")
    sft_batch: int = option(4, "with --sft-coef: demonstration conversations per step")
    stop_without_signal: int = option(10, STOP_HELP)

    def validate(self) -> None:
        super().validate()  # the run's and LoRA's options (the classes after this one)
        validate_options(self)

    @property
    def game_list(self) -> list[str]:
        return list(parse_weights(self.game_shares, "game-shares") if self.game_shares else split_list(self.games))


def validate_stop(cfg) -> None:
    if cfg.stop_without_signal < 0:
        raise TrainingSetupError(f"option --stop-without-signal: must be >= 0 (0: never stop), "
                                 f"got {cfg.stop_without_signal}")


def validate_options(cfg) -> None:
    """TrainingSetupError for a baseline that does not exist, a malformed or not-summing
    ``--partners`` / ``--game-shares``, ``--past-every`` below 1."""
    validate_credit(cfg)
    validate_stop(cfg)
    if cfg.partners:
        parse_weights(cfg.partners, "partners")
    if cfg.game_shares:
        parse_weights(cfg.game_shares, "game-shares")


def validate_credit(cfg) -> None:
    """TrainingSetupError for a ``--baseline`` or a ``--role-baselines`` value that does not exist,
    or an option of the loss out of range (:func:`~playpen.training.grpo.objective.validate_objective`)."""
    validate_objective(cfg)
    if cfg.baseline not in BASELINES:
        raise TrainingSetupError(f"option --baseline: '{cfg.baseline}' is not valid; expected one of "
                                 f"{', '.join(BASELINES)}")
    for role, name in role_baselines(cfg).items():
        if name not in BASELINES:
            raise TrainingSetupError(f"option --role-baselines: '{name}' (for {role}) is not valid; expected one of "
                                     f"{', '.join(BASELINES)}")


def check(config, learner: str, teacher: Optional[str] = None) -> None:
    """Before any model loads: ``--init-adapter`` trained on the learner's base model,
    every ``--partners`` name a partner kind or a registered model, every ``--game-shares``
    game known (and ``--games`` not saying otherwise), ``--rubric`` (:func:`check_rubric`),
    every game declaring a chance level for ``--baseline chance``."""
    check_init_adapter(config.init_adapter, learner)
    if config.partners:
        check_partners(parse_weights(config.partners, "partners"), learner, teacher)
    games = config.game_list
    if config.game_shares:
        from dataclasses import fields
        default = next(f.default for f in fields(config) if f.name == "games")
        games = check_game_shares(parse_weights(config.game_shares, "game-shares"),
                                  [g.strip() for g in config.games.split(",") if g.strip()], default)
    named = role_baselines(config)
    if named:
        check_roles(named, games, config.train_instances, "--role-baselines")
    check_rubric(config, games)
    if getattr(config, "augment_variants", 0) < 0:
        raise TrainingSetupError(f"option --augment-variants: must be >= 0 (0: a draw per episode), "
                                 f"got {config.augment_variants}")
    if "chance" in (config.baseline, *named.values()):
        lacking = [g for g in games if chance_level(g) is None]
        if lacking:
            raise TrainingSetupError(f"--baseline chance: {', '.join(lacking)} declares no chance level "
                                     f"(\"chance_success\" in its clemgame.json); use --baseline running")


def check_rubric(config, games) -> None:
    """``--rubric FILE``: the file checked (game, roles, terms, judge models; nothing loaded),
    its game one of ``games``, and no chance baseline (the chance level is the outcome
    reward's, not the rubric's)."""
    if not getattr(config, "rubric", ""):
        return
    check_rubric_option(config.rubric, list(games))
    if "chance" in (config.baseline, *role_baselines(config).values()):
        raise TrainingSetupError("option --rubric: --baseline chance is the chance level of the outcome reward, "
                                 "not of a rubric; use --baseline group or running")


def role_baselines(cfg) -> dict[str, str]:
    """``--role-baselines ROLE:BASELINE,...`` as a dict (a malformed item: TrainingSetupError)."""
    out = {}
    for item in [v.strip() for v in cfg.role_baselines.split(",") if v.strip()]:
        role, sep, name = item.rpartition(":")
        if not sep or not role.strip() or not name.strip():
            raise TrainingSetupError(f"option --role-baselines: '{item}' is not ROLE:BASELINE (e.g. Proposer:running)")
        out[role.strip()] = name.strip()
    return out


def check_roles(named, games, instances: str, option_name: str) -> None:
    """TrainingSetupError when an option names a role none of ``games`` has (close matches named)."""
    known = sorted({role for game in games for role in game_roles(game, instances)[0]})
    for role in named:
        if role not in known:
            raise TrainingSetupError(f"option {option_name}: unknown role '{role}'.{close_matches(role, known)} "
                                     f"Roles of {', '.join(games)}: {', '.join(known)}")
