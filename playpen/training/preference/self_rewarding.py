"""Self-rewarding over games (after Yuan et al. 2024): the data half of
``playpen run self-rewarding``; :mod:`playpen.training.preference` trains.

Each round plays ``--pair-instances`` training instances per role with the policy the
round starts from (the teacher ``-t`` in the other roles, or the learner itself), takes
the learner's turns ``--fork-turns`` of every episode as branch points, and ranks
``--candidates`` turns at each:

- ``--reward judge`` (default): N candidates are sampled from the policy in the branch
  point's context, token for token as the model saw it, and scored by the judge
  (:mod:`playpen.training.rubrics.judging`: the learner itself or any registered model, a prompt
  template and a score regex). Replies that give no score are counted, written to the
  run's log (``judge_unparsed`` lines of ``playpen-log.jsonl``) and skipped; a round in
  which no reply gives a score stops with one line.
- ``--reward game``: the external-reward variant. Every episode forks at the branch point
  into N branches, the partner finishes each, and the game's own outcome ranks them
  (the forked player's reward, as DPO's branching source:
  :class:`~playpen.training.preference.pair_sources.BranchCollector`).

Either way a branch point gives at most one pair: the best candidate chosen, the worst
rejected (ties give none). Prompts are the branch point's token ids; chosen and rejected
are the ids the policy generated. Judge prompts and replies are never training data.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from playpen.callbacks import JsonlLogCallback
from playpen.errors import DatasetError, JudgeError, TrainingSetupError
from playpen.inference import engine
from playpen.pairs import PreferencePair, turn_span
from playpen.registry import close_matches
from playpen.rollouts import InstanceRef, Learner, rollout
from playpen.training.common.config import option, split_list
from playpen.training.common.plotting import LOG_FILE
from playpen.training.preference.pair_sources import BranchCollector
from playpen.training.rubrics.judging import JudgeRequest

REWARDS = ("judge", "game")


@dataclass
class SelfRewardingOptions:
    """How candidate turns are made and ranked, and how many rounds."""

    reward: str = option("judge", "ranks the candidates: judge (--judge's scores) or game (the game's own "
                                  "outcome: each candidate's episode is finished with the partner)")
    candidates: int = option(4, "candidate turns per branch point (best vs worst gives the pair)")
    fork_turns: str = option("0", "the learner turns that are branch points (0 = first move; comma-separated)")
    pair_instances: int = option(8, "training instances played per role each round (0 = all)")
    roles: str = option("", "roles whose turns are judged (comma-separated; empty = all)")
    max_concurrent_episodes: int = option(16, "episodes played together; candidates generated together")
    rounds: int = option(3, "rounds: each collects with the policy the previous round ended with (and, "
                            "with --judge learner, is judged by it) and trains --max-steps/--rounds steps")

    def validate(self) -> None:
        super().validate()
        if self.reward not in REWARDS:
            raise TrainingSetupError(f"unknown reward '{self.reward}'.{close_matches(self.reward, list(REWARDS))}"
                                     f" Choose from: {', '.join(REWARDS)}")

    @property
    def branches(self) -> int:  # the name BranchCollector reads
        return self.candidates

    @property
    def turns(self) -> list[int]:
        return [int(t) for t in split_list(self.fork_turns)]


# ----------------------------------------------------------------------------- branch points

@dataclass(frozen=True)
class BranchPoint:
    """A learner turn of a played episode: the context before it (messages and token ids)."""

    episode: Any
    player: str
    role: str
    turn: int
    prompt: tuple[dict, ...]
    prompt_ids: tuple[int, ...]


def branch_points(episode: Any, role: str, turns: list[int]) -> list[BranchPoint]:
    """The player(s) of `role` in `episode`: their turns `turns` that were played."""
    out = []
    players = sorted({t.player_name for t in episode.trajectories
                      if t.side_call is None and role in (t.role, t.player_name)})
    for player in players:
        mine = [t for t in episode.trajectories if t.player_name == player and t.side_call is None]
        for turn in turns:
            span = turn_span(mine, turn)
            if span is None:
                continue
            t, start, _, index = span
            # the segment's generated turns are its last num_turns assistant messages
            assistant = [i for i, m in enumerate(t.messages) if m["role"] == "assistant"]
            position = len(assistant) - t.num_turns + index
            if not 0 <= position < len(assistant):
                continue
            prompt = tuple({"role": m["role"], "content": m["content"]} for m in t.messages[:assistant[position]])
            out.append(BranchPoint(episode, player, t.role, turn, prompt,
                                   tuple(t.prompt_ids) + tuple(t.completion_ids[:start])))
    return out


def best_vs_worst(point: BranchPoint, candidates: list, scores: list[Optional[float]], meta: dict
                  ) -> Optional[PreferencePair]:
    """The pair of a branch point: the highest-scored candidate chosen, the lowest rejected
    (the first of equals); None when fewer than two have a score or they all tie."""
    scored = [(s, c) for s, c in zip(scores, candidates) if s is not None]
    if len(scored) < 2:
        return None
    best = max(scored, key=lambda x: x[0])
    worst = min(scored, key=lambda x: x[0])
    if best[0] == worst[0] or tuple(best[1].token_ids) == tuple(worst[1].token_ids):
        return None
    e = point.episode
    meta = {"source": "self-rewarding", "game": e.game, "experiment": e.experiment, "game_id": e.game_id,
            "player_name": point.player, "game_role": point.role, "turn": point.turn, "episode": e.episode_id,
            **meta, "scores": scores, "chosen": {"score": best[0]}, "rejected": {"score": worst[0]}}
    return PreferencePair(point.prompt, best[1].text, worst[1].text, meta, point.prompt_ids,
                          tuple(best[1].token_ids), tuple(worst[1].token_ids))


# ----------------------------------------------------------------------------- collectors

class JudgeCollector(BranchCollector):
    """``(round, policy) -> pairs`` for ``--reward judge``: plays with `policy`, samples
    ``--candidates`` turns at each branch point, has `judge` (a
    :class:`~playpen.training.rubrics.judging.Judge`) score them; unparsed replies go to `log_file`."""

    def __init__(self, trainer, records_dir: Path, judge, log_file: Path, teacher: Any = None):
        super().__init__(trainer, records_dir, teacher)
        self.judge, self.log_file = judge, Path(log_file)
        self.totals = Counter()

    def _play(self, round_: int, learner) -> tuple[list, list]:
        cfg, episodes, stats = self.cfg, [], []
        for role in dict.fromkeys(s.role for s in self.slots):
            instances = list(dict.fromkeys(s.instance for s in self.slots if s.role == role))
            if cfg.pair_instances and len(instances) > cfg.pair_instances:
                instances = self.rng.sample(instances, cfg.pair_instances)
            for game in dict.fromkeys(i[0] for i in instances):
                partners = None if self.teacher is None else \
                    {r: self.teacher for r in self.game_roles[game] if r != role}
                result = rollout(game, learner, roles=None if self.teacher is None else [role], partners=partners,
                                 instances=[InstanceRef(*i) for i in instances if i[0] == game],
                                 instances_file=cfg.train_instances,
                                 max_concurrent_episodes=cfg.max_concurrent_episodes, records_dir=self.records_dir,
                                 callbacks=self.callbacks, seed=self.seed * 100003 + round_ * 101)
                episodes += [(role, e) for e in result.episodes]
                stats.append(result.stats)
        return episodes, stats

    def __call__(self, round_: int, policy: Any) -> list[PreferencePair]:
        import torch

        cfg = self.cfg
        learner = Learner(policy, self.tokenizer, self.learner_name, self.sampling, self.template_kwargs)
        played, stats = self._play(round_, learner)
        points = [p for role, e in played for p in branch_points(e, role, cfg.turns)]
        if not points:
            raise DatasetError(f"round {round_}: no episode reached the learner turns {cfg.fork_turns} of the "
                               f"roles played ({len(played)} episodes): lower --fork-turns")
        # 1. N candidates per branch point, from the exact token context
        sampling = replace(self.sampling, max_batch_size=cfg.max_concurrent_episodes)
        torch.manual_seed(self.seed * 7919 + round_)
        policy.eval()
        with torch.no_grad():
            flat, _ = engine.generate_within(policy, self.tokenizer,
                                                 [p.prompt_ids for p in points for _ in range(cfg.candidates)],
                                                 sampling)
        candidates = [[g for g in flat[i * cfg.candidates:(i + 1) * cfg.candidates] if g is not None]
                      for i in range(len(points))]
        # 2. the judge scores every distinct candidate of a branch point once
        keys = list(dict.fromkeys((i, c.text) for i, cs in enumerate(candidates) for c in cs))
        requests = [JudgeRequest(points[i].prompt, text, points[i].episode.game, points[i].role, points[i].turn)
                    for i, text in keys]
        started = time.time()
        verdicts = dict(zip(keys, self.judge.verdicts(requests, policy=policy)))
        judge_seconds = time.time() - started
        unparsed = [(points[i], text, v) for (i, text), v in verdicts.items() if v.score is None]
        self._log_unparsed(round_, unparsed)
        # 3. best vs worst per branch point
        pairs, ties = [], 0
        for i, (point, cs) in enumerate(zip(points, candidates)):
            pair = best_vs_worst(point, cs, [verdicts[(i, c.text)].score for c in cs],
                                 {"judge": self.judge.name, "round": round_})
            if pair is None:
                ties += 1
            else:
                pairs.append(pair)
        parsed = [v.score for v in verdicts.values() if v.score is not None]
        self.totals.update(replies=len(verdicts), unparsed=len(unparsed))
        episodes = [e for _, e in played]
        self.last_metrics = {"rollout/episodes": len(episodes),
                             "rollout/percent_played": 100.0 * sum(e.outcome in ("success", "failure")
                                                                   for e in episodes) / max(1, len(episodes)),
                             "rollout/seconds": sum(s.seconds_total for s in stats),
                             "pairs/branch_points": len(points), "pairs/no_pair": ties,
                             "judge/replies": len(verdicts), "judge/unparsed": len(unparsed),
                             "judge/unparsed_total": self.totals["unparsed"],
                             "judge/score_mean": sum(parsed) / len(parsed) if parsed else float("nan"),
                             "judge/seconds": judge_seconds}
        print(f"[playpen] round {round_}: judge '{self.judge.name}' scored {len(parsed)} of {len(verdicts)} "
              f"candidates ({len(unparsed)} replies without a score, skipped; logged in {self.log_file})", flush=True)
        if verdicts and not parsed:
            first = next(iter(verdicts.values())).reply
            raise JudgeError(f"round {round_}: judge '{self.judge.name}' gave no score in any of its {len(verdicts)} "
                             f"replies (score regex {self.judge.spec.regex_source}, range "
                             f"{self.judge.spec.low:g}..{self.judge.spec.high:g}; first reply {first[:80]!r}); "
                             f"nothing was trained; the replies are in {self.log_file}")
        if not pairs:
            raise DatasetError(f"round {round_}: no preference pairs: at each of the {len(points)} branch points "
                               f"the judge scored all candidates alike or fewer than two; raise --candidates or "
                               f"--pair-instances, or sample more diversely (-T)")
        return pairs

    def _log_unparsed(self, round_: int, unparsed: list) -> None:
        """One ``judge_unparsed`` line per reply without a score in the run's JSON log."""
        if not unparsed:
            return
        log = JsonlLogCallback(self.log_file)
        for point, text, verdict in unparsed:
            e = point.episode
            log.write_event("judge_unparsed", round=round_, judge=self.judge.name, game=e.game,
                            experiment=e.experiment, game_id=e.game_id, role=point.role, turn=point.turn,
                            candidate=text[:500], reply=verdict.reply[:2000])


class GameRewardCollector(BranchCollector):
    """``(round, policy) -> pairs`` for ``--reward game``: DPO's branching (every branch
    finished with the partner, ranked by the game's outcome), reduced to best vs worst."""

    def __call__(self, round_: int, policy: Any) -> list[PreferencePair]:
        pairs = super().__call__(round_, policy)
        best: dict[str, PreferencePair] = {}
        for pair in pairs:
            fork = pair.meta["fork"]
            key = (pair.meta["chosen"]["reward"], -pair.meta["rejected"]["reward"])
            if fork not in best or key > (best[fork].meta["chosen"]["reward"],
                                          -best[fork].meta["rejected"]["reward"]):
                best[fork] = pair
        out = [PreferencePair(p.prompt, p.chosen, p.rejected, {**p.meta, "source": "self-rewarding",
                                                                 "reward": "game", "round": round_},
                              p.prompt_ids, p.chosen_ids, p.rejected_ids) for p in best.values()]
        self.last_metrics = {**self.last_metrics, "pairs/num_all": len(pairs)}
        return out


def collector(trainer, records_dir: Path, run_dir: Path, judge=None, teacher: Any = None):
    """The collector of ``--reward`` (its episodes also logged in the run's JSON log)."""
    if trainer.config.reward == "game":
        made = GameRewardCollector(trainer, records_dir, teacher)
    else:
        made = JudgeCollector(trainer, records_dir, judge, Path(run_dir) / LOG_FILE, teacher)
    made.log_episodes_to(run_dir)
    return made
