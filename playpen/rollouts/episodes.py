"""One running episode of a rollout, and what it becomes when it ends: an
:class:`EpisodeResult` with the learner's trajectories, and a folder of records."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from playpen.rollouts.buffers import TokenBuffer
from playpen.rollouts.chat import strip_system
from playpen.rollouts.plan import GamePlan
from playpen.rollouts.records import episode_dir_name
from playpen.rollouts.types import LEARNER, EpisodeResult, SideCall, Trajectory, TurnRecord


@dataclass
class Episode:
    """The state of one episode (or branch) while it plays."""

    order: tuple
    plan: GamePlan
    row: dict
    repeat: int
    env: Any
    base_id: str
    group_id: str
    branch_path: tuple[int, ...] = ()
    parent_id: Optional[str] = None
    depth: int = 0
    buffers: dict[str, TokenBuffer] = field(default_factory=dict)
    learner_turns: dict[str, int] = field(default_factory=dict)
    turns: list[TurnRecord] = field(default_factory=list)
    side_calls: list[SideCall] = field(default_factory=list)
    side_buffers: list[tuple[int, str, TokenBuffer]] = field(default_factory=list)
    """The learner's side calls: (index in side_calls, player name, its token view)."""
    failed: bool = False
    meta: dict = field(default_factory=dict)
    """More entries for episode.json (a hierarchy's level and links: :mod:`playpen.rollouts.hierarchy`)."""

    @property
    def episode_id(self) -> str:
        if not self.branch_path:
            return self.base_id
        return f"{self.base_id}/b{'.'.join(str(i) for i in self.branch_path)}"

    @property
    def experiment(self) -> str:
        return self.row["experiment"]["name"]

    @property
    def game_id(self) -> int:
        return int(self.row["game_instance"]["game_id"])

    def models(self) -> dict[str, str]:
        """Player name -> model name, as the game master built them."""
        if self.env.game_master is None:
            return {}
        return {p.name: p.model.name for p in self.env.game_master.get_players()}

    def trajectories(self, result, learner_name: str) -> tuple[Trajectory, ...]:
        """The learner's trajectories of this finished episode, one per player and segment."""
        out = []
        for player_name, buffer in self.buffers.items():
            role = self.plan.roles.get(player_name, "")
            for segment, prompt, completion, mask, logprobs, num_turns, seen in buffer.segments():
                if not any(mask):
                    continue
                out.append(Trajectory(
                    episode_id=self.episode_id, game=self.plan.name, experiment=self.experiment,
                    game_id=self.game_id, repeat=self.repeat, player_name=player_name, role=role,
                    model=self._model_name(player_name, learner_name), prompt_ids=prompt, completion_ids=completion, env_mask=mask,
                    logprobs=logprobs, num_turns=num_turns, outcome=result.outcome,
                    main_score=result.main_score, reward=result.rewards.get(player_name, math.nan),
                    group_id=self.group_id, parent_id=self.parent_id, branch_path=self.branch_path,
                    segment=segment, messages=tuple(strip_system(seen))))
        for index, player_name, buffer in self.side_buffers:
            (_, prompt, completion, mask, logprobs, num_turns, seen), = buffer.segments()
            out.append(Trajectory(
                episode_id=self.episode_id, game=self.plan.name, experiment=self.experiment,
                game_id=self.game_id, repeat=self.repeat, player_name=player_name,
                role=self.plan.roles.get(player_name, ""), model=learner_name, prompt_ids=prompt,
                completion_ids=completion, env_mask=mask, logprobs=logprobs, num_turns=num_turns,
                outcome=result.outcome, main_score=result.main_score,
                reward=result.rewards.get(player_name, math.nan), group_id=self.group_id,
                parent_id=self.parent_id, branch_path=self.branch_path, messages=tuple(strip_system(seen)),
                side_call=index))
        return tuple(out)

    def _model_name(self, player_name: str, learner_name: str) -> str:
        """The name of who generated a buffered player's turns: the learner or an adapter player."""
        responder = self.plan.responders.get(player_name, LEARNER)
        return learner_name if responder is LEARNER else getattr(responder, "name", learner_name)

    def copy_side_calls(self) -> tuple[list, list]:
        """The side calls so far, for a branch forked from this episode."""
        return list(self.side_calls), [(i, name, b.copy()) for i, name, b in self.side_buffers]

    def result(self, *, outcome: str, main_score: float, rewards: dict, trajectories=(),
               episode_scores: Optional[dict] = None, path: Optional[Path] = None,
               error: Optional[str] = None) -> EpisodeResult:
        return EpisodeResult(
            episode_id=self.episode_id, game=self.plan.name, experiment=self.experiment, game_id=self.game_id,
            repeat=self.repeat, outcome=outcome, main_score=main_score, rewards=dict(rewards),
            roles=dict(self.plan.roles), models=self.models(), num_turns=len(self.turns),
            turns=tuple(self.turns), trajectories=tuple(trajectories), episode_scores=dict(episode_scores or {}),
            group_id=self.group_id, parent_id=self.parent_id, branch_path=self.branch_path, path=path,
            error=error, side_calls=tuple(self.side_calls))

    def write(self, writer, learner_name: str, *, outcome: str, main_score: float, rewards: dict,
              error: Optional[BaseException]) -> Optional[Path]:
        """Write the episode's records with `writer` (a RunWriter; None writes nothing)."""
        if writer is None:
            return None
        plan = self.plan
        meta = dict(episode_id=self.episode_id, group_id=self.group_id, parent_id=self.parent_id,
                    branch_path=list(self.branch_path), repeat=self.repeat, outcome=outcome,
                    main_score=main_score, rewards=dict(rewards), roles=dict(plan.roles),
                    responders={name: ("learner" if r is LEARNER else getattr(r, "name", str(r)))
                                for name, r in plan.responders.items()},
                    learner=learner_name, num_turns=len(self.turns),
                    learner_tokens={name: sum(b.env_mask) for name, b in self.buffers.items()},
                    side_calls=[asdict(call) for call in self.side_calls])
        meta.update(self.meta)
        log = self.env.episode_log() if error is None else None
        return writer.write_episode(
            model_dir=plan.model_dir, game_name=plan.name, experiment=self.row["experiment"],
            game_instance=self.row["game_instance"],
            dir_name=episode_dir_name(self.game_id, self.repeat, self.branch_path),
            model_infos=plan.model_infos, interactions=log.interactions if log else None,
            requests=log.requests if log else {}, episode_meta=meta, error=error)
