"""Planning a rollout call: each game's benchmark and instances, who answers which player
slot, and the ordered list of episodes to play."""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

from playpen.clem import clemcore
from playpen.envs.loading import game_instance_rows, load_benchmark, probe_roles
from playpen.errors import RolloutError
from playpen.registry import close_matches, game_spec
from playpen.rollouts.partners import stand_in_model
from playpen.rollouts.types import LEARNER, InstanceRef


@dataclass
class GamePlan:
    """One game: its benchmark, who plays which slot, and the model folder name."""

    name: str
    spec: Any
    benchmark: Any
    rows: list[dict]
    responders: dict[str, Any]  # player name -> LEARNER | Partner
    roles: dict[str, str]  # player name -> role
    player_models: list
    model_dir: str
    model_infos: dict
    requested: str = ""  # the name the caller asked for (``source:game``, a path, or the name)
    aliases: dict[str, str] = field(default_factory=dict)
    """clemgame.json role -> player name, where it differs from the player's ``game_role``
    (``Guesser`` for a ``WordGuesser``): what ``playpen list games -v`` shows works too."""


def plan_game(name, learner_model, partner_objects, roles, instances, instances_file) -> GamePlan:
    """Load game `name` and decide who answers each of its player slots."""
    spec = game_spec(name, instances_file)
    benchmark = load_benchmark(spec)
    try:
        rows = game_instance_rows(spec)
        if callable(instances):
            rows = [r for r in rows if instances(r)]
        if not rows:
            raise RolloutError(f"game '{name}': no instances selected")
        slots, own = probe_roles(benchmark, rows[0])
        aliases = role_aliases(getattr(spec, "roles", None), slots)
        responders, role_of, models = {}, {}, [None] * int(spec.players)
        for slot in slots:
            keys = (slot.role, slot.player_name, *(a for a, p in aliases.items() if p == slot.player_name))
            partner = next((partner_objects[k] for k in keys if k in partner_objects), None)
            if partner is None or partner is LEARNER:
                if partner is None and roles is not None and not any(k in roles for k in keys):
                    raise RolloutError(f"game '{name}': nobody plays role '{slot.role}' "
                                       f"({slot.player_name}): add it to roles or partners")
                responders[slot.player_name] = LEARNER
                models[slot.index] = learner_model
            else:
                responders[slot.player_name] = partner
                models[slot.index] = partner.clem_model()
            role_of[slot.player_name] = slot.role
        for player_name, role in own:
            role_of[player_name] = role
        # a game may declare more players than it builds from player_models (its questioner
        # is programmatic, built by the game): those slots get a stand-in that refuses calls
        for index, model in enumerate(models):
            if model is None:
                models[index] = unused_slot_model(name, index)
        model_cls = clemcore().backends.Model
        used = [models[i] for i in sorted({slot.index for slot in slots})] or models[:1]
        names = [m.name for m in used]
        model_dir = model_cls.to_identifier(used if len(set(names)) > 1 else used[:1])
        infos = model_cls.to_infos(models)
        return GamePlan(spec.game_name, spec, benchmark, rows, responders, role_of, models, model_dir, infos,
                        requested=name, aliases=aliases)
    except BaseException:
        benchmark.close()
        raise


def role_aliases(declared, slots) -> dict[str, str]:
    """clemgame.json's role names (``declared``) that name no player's ``game_role`` -> the one
    player slot whose role they name a part of, ignoring case and spaces (``Guesser`` ->
    the ``WordGuesser``); a name that fits no slot or several is no alias."""
    def norm(text: str) -> str:
        return "".join(str(text).lower().split()).replace("_", "")
    out = {}
    for name in declared if isinstance(declared, list) else []:
        if not isinstance(name, str) or any(name in (s.role, s.player_name) for s in slots):
            continue
        fits = [s for s in slots if norm(name) and (norm(s.role).endswith(norm(name))
                                                    or norm(s.role).startswith(norm(name)))]
        if len(fits) == 1:
            out[name] = fits[0].player_name
    return out


def unused_slot_model(game: str, index: int):
    """The model of a player slot that the game's master does not use (found by
    :func:`playpen.envs.loading.probe_roles` on the first instance): a call to it means
    another instance builds that player after all, which fails the episode clearly."""
    def refuse(messages):
        raise RolloutError(f"game '{game}': player slot {index + 1} was unused when the roles were "
                           f"probed (first instance), but this instance calls its model")
    return stand_in_model("unused-slot", refuse)


def check_keys_used(plans, roles, partner_objects) -> None:
    """Every role or player name the caller gave exists in one of the games (and no game
    name comes twice: two copies of a game would write into the same records folder)."""
    names = [plan.name for plan in plans]
    twins = sorted({plan.requested for plan in plans if names.count(plan.name) > 1})
    if twins:
        raise RolloutError(f"{', '.join(twins)} are copies of one game name: roll them out in separate calls")
    known = sorted({v for plan in plans for item in plan.roles.items() for v in item}
                   | {alias for plan in plans for alias in plan.aliases})
    for key in [*(roles or []), *partner_objects]:
        if key not in known:
            raise RolloutError(f"unknown role or player '{key}'.{close_matches(key, known)} "
                               f"Roles and players of {', '.join(p.name for p in plans)}: {', '.join(known)}")


def pending_episodes(plans, instances, num_repeats, augment_seed=None, augment_variants: int = 0) -> list[tuple]:
    """The episodes to play, ``(order, plan, row, repeat)`` in request order; with an
    ``augment_seed``, each episode's row as its game's augmentation rewrites it (:func:`augmented`):
    every episode its own draw, or with ``augment_variants`` N > 0 the repeats of an
    instance drawn from N variants (repeat r plays variant r mod N)."""
    out = _pending(plans, instances, num_repeats)
    if augment_seed is None:
        return out
    return [(order, plan, augmented(plan, row, augment_seed, repeat % augment_variants if augment_variants else i),
             repeat)
            for i, (order, plan, row, repeat) in enumerate(out)]


def augmented(plan, row: dict, seed: int, index: int) -> dict:
    """``row`` with the game instance its game's benchmark rewrites for one episode: a game
    declares a rollout augmentation by a method ``augment_instance(game_instance, rng)``
    that returns a new instance (same game_id) playing the same and scoring right, e.g.
    referencegame shuffles the order of the follower's grids. Games without one: ``row``.
    The draw is seeded by ``seed``, the game, the instance and ``index`` (equal: equal draws)."""
    augment = getattr(plan.benchmark, "augment_instance", None)
    if augment is None:
        return row
    rng = random.Random(f"{seed}/{plan.name}/{row['experiment']['name']}/{row['game_instance']['game_id']}/{index}")
    instance = augment(copy.deepcopy(row["game_instance"]), rng)
    return {**row, "game_instance": instance}


def _pending(plans, instances, num_repeats) -> list[tuple]:
    out = []
    if instances is not None and not callable(instances):
        by_name = {**{plan.requested: plan for plan in plans}, **{plan.name: plan for plan in plans}}
        seen: dict[tuple, int] = {}
        for index, ref in enumerate(instances):
            if not isinstance(ref, InstanceRef):
                ref = InstanceRef(*ref)
            plan = by_name.get(ref.game)
            if plan is None:
                raise RolloutError(f"instance {ref}: game '{ref.game}' is not among the games "
                                   f"{sorted(by_name)}")
            row = next((r for r in plan.rows if r["experiment"]["name"] == ref.experiment
                        and int(r["game_instance"]["game_id"]) == int(ref.game_id)), None)
            if row is None:
                raise RolloutError(f"instance {ref}: no such experiment/game_id in {plan.name}'s instances")
            key = (ref.game, ref.experiment, int(ref.game_id))
            for _ in range(num_repeats):
                repeat = seen.get(key, 0)
                seen[key] = repeat + 1
                out.append(((index, repeat), plan, row, repeat))
        return out
    index = 0
    for plan in plans:
        for row in plan.rows:
            for repeat in range(num_repeats):
                out.append(((index, repeat), plan, row, repeat))
            index += 1
    return out


