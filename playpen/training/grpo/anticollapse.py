"""The GRPO options against collapse and forgetting (``--baseline``, ``--partners``,
``--past-every``, ``--game-shares``, ``--augment``): their checks and what they build.

- :func:`validate_options`: values, when the config is built;
- :func:`check`: names (partner models, games, an init adapter's base model, chance
  levels), once the model names are known and before any model loads;
- :func:`dataset`, :func:`partner_mix`, :func:`advantages`: the parts of the run.

See :mod:`playpen.training.grpo.mixes`, :mod:`playpen.training.grpo.advantages` and
:mod:`playpen.training.grpo.past`; docs/trainers.md says when to use each option.
"""
from __future__ import annotations

from typing import Any, Optional

from playpen.envs.loading import game_roles
from playpen.errors import TrainingSetupError
from playpen.models import load_model_by_name
from playpen.registry import close_matches
from playpen.training.grpo.advantages import BASELINES, Advantages, chance_rewards
from playpen.training.grpo.mixes import (PAST, PROGRAMMATIC, SELF, TEACHER, PartnerMix, chance_level, check_game_shares,
                                         check_partners, game_dataset_slots, parse_weights)
from playpen.training.grpo.objective import validate_objective
from playpen.training.grpo.offpolicy import PolicyLagGuard
from playpen.training.grpo.past import PastPolicies
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.rubrics.files import check_rubric_option

NO_SIGNAL_HINT = ("Start from a supervised adapter (`playpen run sft`, then --init-adapter "
                  "models/sft+lora/<learner>/checkpoint-N) or mix in a competent partner "
                  "(--partners programmatic:0.5,self:0.5, or -t programmatic with `playpen run grpo-teacher`).")


def validate_options(cfg) -> None:
    """TrainingSetupError for a baseline that does not exist, a malformed or not-summing
    ``--partners`` / ``--game-shares``, ``--past-every`` below 1."""
    validate_credit(cfg)
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


def dataset(cfg, per_instance: list, seed: int):
    """The slot dataset of a ``--game-shares`` run: groups dealt to the games by share."""
    from datasets import Dataset
    per_game: dict[str, list] = {}
    for slots in per_instance:
        per_game.setdefault(slots[0].game, []).append(slots)
    slots = game_dataset_slots(per_game, parse_weights(cfg.game_shares, "game-shares"),
                               cfg.groups_per_step * cfg.max_steps, seed)
    return Dataset.from_list([{"prompt": s.to_prompt()} for s in slots])


def partner_mix(playpen, teacher: Any, tokenizer: Any, sampling: Any) -> PartnerMix:
    """The run's partner mix: ``--partners``, else the trainer's own partner (``teacher``;
    None: self-play). Model names load here (as partners, with the learner's sampling)."""
    cfg = playpen.config
    weights = parse_weights(cfg.partners, "partners") if cfg.partners else {TEACHER if teacher is not None
                                                                            else SELF: 1.0}
    objects: dict[str, Any] = {SELF: "learner", PROGRAMMATIC: PROGRAMMATIC}
    if TEACHER in weights:
        objects[TEACHER] = teacher if teacher is not None else playpen.teacher
        if objects[TEACHER] is None:
            raise TrainingSetupError("--partners names 'teacher' but no -t/--teacher MODEL is given")
    past = None
    for name in weights:
        if name == PAST:
            past = PastPolicies(tokenizer, playpen.learner.name, sampling, cfg.past_every, playpen.seed)
        elif name not in objects:
            objects[name] = load_model_by_name(name, role="partner", gen_args=dict(
                temperature=sampling.temperature, max_tokens=sampling.max_new_tokens))
    return PartnerMix(weights, objects, past, playpen.seed)


def advantages(cfg, game_roles: dict[str, list[str]], reward_fn) -> Advantages:
    """The advantage computation of ``--baseline`` for groups of ``--num-generations``."""
    chance = None
    if "chance" in (cfg.baseline, *role_baselines(cfg).values()):
        chance = chance_rewards(game_roles, reward_fn, {game: chance_level(game) for game in game_roles})
    hint = NO_SIGNAL_HINT
    if cfg.init_adapter:
        hint = ("Mix in a competent partner (--partners programmatic:0.5,self:0.5) or raise the sampling "
                "temperature (-T) so that the episodes of a group differ.")
    return Advantages(cfg.baseline, cfg.num_generations, chance=chance, hint=hint, momentum=cfg.baseline_decay,
                      credit=cfg.credit, constant=cfg.baseline_constant, role_baselines=role_baselines(cfg),
                      scale=cfg.scale_rewards)


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


def guard(cfg):
    """The off-policy guard of ``--max-policy-lag`` and ``--off-policy``."""
    return PolicyLagGuard(cfg.max_policy_lag, cfg.off_policy)
