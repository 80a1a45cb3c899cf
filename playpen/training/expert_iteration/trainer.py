"""Expert iteration (the STaR / ReST / rejection-sampling family) with LoRA: rounds of
playing the training instances with the current policy, keeping the learner's own won
episodes, and supervised steps on its turns in them.

Why it is here: it is the simplest way of learning from interaction that the field uses
as a baseline — no reward model, no reference policy, no advantages: a policy imitates
the best of what it did itself. If a method that needs all of those does not beat it, or
it does not beat more SFT on the demonstrations, the comparison says so (benchmarks/protocol.py).

Round r plays ``--instances-per-round`` training instances (a seeded sample) ``--samples-per-instance``
times each with the policy round r-1 ended with (round 1: the base model, or ``--init-adapter``),
the learner in ``--roles`` (empty: every role, self-play) and the teacher (``-t``) in the
others; keeps what :mod:`~playpen.training.expert_iteration.selection` keeps (own turns of
won episodes, at most ``--top-k`` per instance by score) into ``round-R.jsonl``; and trains
SFT steps ``(b[r-1], b[r]]`` of ``--max-steps`` split evenly over ``--rounds`` with TRL's
SFTTrainer, the loss on the learner's generated tokens only. A round in which nothing was
won trains nothing; the next round trains its steps too. Checkpoints number the steps of
the whole run, so ``--resume`` finds the round to continue (re-reading its ``round-R.jsonl``).
"""
from __future__ import annotations

from dataclasses import replace

import json
import random
from pathlib import Path
from typing import Any, Optional

from playpen.errors import DatasetError, TrainingSetupError
from playpen.files import write_jsonl
from playpen.inference.transformers_compat import checkpointing_args
from playpen.models import load_init_adapter
from playpen.rollouts import InstanceRef, Learner, SamplingConfig, rollout
from playpen.rollouts.chat import template_kwargs_of, warn_if_discontinuous
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import split_list
from playpen.training.expert_iteration.config import ExpertIterationConfig
from playpen.training.expert_iteration.selection import kept_trajectories, record_of
from playpen.training.grpo.rollout_bridge import training_slots
from playpen.training.grpo.watch import PolicyWatch, rollout_health
from playpen.training.preference.rounds import check_init_adapter, round_bounds
from playpen.training.sft.anchor import demonstration_rows
from playpen.training.sft.trainer import sft_args


class RoundPlayer:
    """``(round, policy) -> records``: one round's episodes, played and filtered; the
    round's counts stay in :attr:`metrics` for the log lines of its steps."""

    def __init__(self, trainer, records_dir: Path):
        cfg = trainer.config
        self.trainer, self.cfg, self.records_dir = trainer, cfg, records_dir
        self.roles = split_list(cfg.roles)
        per_instance, self.game_roles = training_slots(cfg.game_list, self.roles, instances=cfg.train_instances,
                                                                   items=cfg.train_items)
        self.instances = list(dict.fromkeys(slots[0].instance for slots in per_instance))
        self.tokenizer = lifecycle.tokenizer_of(trainer.learner)
        self.template_kwargs = template_kwargs_of(trainer.learner)
        warn_if_discontinuous(self.tokenizer, trainer.learner.name, self.template_kwargs)
        # -T/-L of `playpen run`; imitation of one's own wins needs varied episodes: greedy becomes 1.0
        sampling = SamplingConfig.from_gen_args(getattr(trainer.learner, "gen_args", None))
        if sampling.temperature == 0:
            sampling = replace(sampling, temperature=1.0)
        self.sampling = sampling
        self.metrics: dict[str, float] = {}
        # does each round play the weights the last one trained? (a round that won nothing trains nothing)
        self.watch = PolicyWatch(cfg.learning_rate, unit="rounds", sampling=sampling)

    def __call__(self, round_: int, policy: Any) -> list[dict]:
        cfg, trainer = self.cfg, self.trainer
        rng = random.Random(trainer.seed * 1009 + round_)
        chosen = list(self.instances)
        if cfg.instances_per_round and cfg.instances_per_round < len(chosen):
            chosen = rng.sample(chosen, cfg.instances_per_round)
        learner = Learner(policy, self.tokenizer, trainer.learner.name, self.sampling, self.template_kwargs)
        common = dict(instances_file=cfg.train_instances, num_repeats=cfg.samples_per_instance,
                      max_concurrent_episodes=cfg.max_concurrent_episodes, records_dir=self.records_dir,
                      callbacks=trainer.callbacks, seed=trainer.seed * 100003 + round_)
        policy.eval()  # no dropout while playing
        episodes = []
        for game in dict.fromkeys(i[0] for i in chosen):
            refs = [InstanceRef(*i) for i in chosen if i[0] == game]
            if trainer.teacher is None:  # self-play: the learner plays every role
                result = rollout([game], learner, instances=refs, **common)
            else:
                mine = [r for r in self.game_roles[game] if r in self.roles]
                others = {r: trainer.teacher for r in self.game_roles[game] if r not in self.roles}
                result = rollout([game], learner, roles=mine, partners=others, instances=refs, **common)
            episodes += result.episodes
        watched = self.watch.check(policy, round_)  # after the rollout: what vLLM was handed for it
        kept = kept_trajectories(episodes, trainer.learner.name, self.roles, cfg.top_k)
        won = sum(e.outcome == "success" for e in episodes)
        groups: dict = {}  # an instance's samples: a group without a win gives nothing to imitate
        for e in episodes:
            groups.setdefault((e.game, e.experiment, e.game_id), []).append(e.outcome == "success")
        self.metrics = {"expert/round": round_, "expert/episodes": len(episodes),
                        "expert/win_rate": 100.0 * won / max(1, len(episodes)),
                        "expert/no_win_groups": 100.0 * sum(not any(g) for g in groups.values()) / max(1, len(groups)),
                        "rollout/percent_played": 100.0 * sum(e.outcome not in ("aborted", "error") for e in episodes)
                        / max(1, len(episodes)),
                        "expert/kept": len(kept),
                        **rollout_health([e.outcome for e in episodes], [e.num_turns for e in episodes]), **watched}
        return [record_of(t, round_) for t in kept]


class ExpertIterationTrainer(BasePlayPen):
    """Expert iteration with LoRA: imitate the learner's own won episodes, round by round.

        playpen run expert-iteration -l smol-135m -t programmatic -L 40 --games taboo --roles Guesser \\
            --init-adapter models/sft+lora/smol-135m/checkpoint-8
        playpen run expert-iteration -l smol-135m -L 40 --games taboo     # self-play
        playpen run expert-iteration -l smol-135m --resume                # after Ctrl-C or a crash

    Each of ``--rounds`` rounds plays ``--instances-per-round`` training instances
    ``--samples-per-instance`` times with the current policy (``-T``; greedy means 1.0), the
    teacher ``-t`` in the roles the learner does not play (with a teacher, ``--roles`` names
    the learner's); keeps the learner's own turns of the won episodes (at most ``--top-k``
    per instance, best scores first; never a partner's turn) and trains
    ``--max-steps/--rounds`` SFT steps on them, the loss on the tokens the learner generated.
    The STaR / ReST family: the baseline a method with rewards, references and advantages
    should beat (module docstring). ``--demo-share F`` makes F of each round's rows
    demonstrations (the programmatic players' won training episodes of ``--demo-roles``, every
    role by default, marked ``"demonstration": true`` in ``round-R.jsonl``): an anchor for the
    roles and turns the learner's own wins do not cover, which the shared LoRA otherwise lets
    drift (benchmarks/results/LOG.md, "Trust").

    Outputs: ``models/expert-iteration+lora/<learner>[/<teacher>]/`` holds ``checkpoint-N``,
    each round's kept trajectories ``round-R.jsonl``, ``playpen-log.jsonl``,
    ``learning-curve.png`` and ``playpen-run.json``; the rounds' episodes are recorded under
    ``<output_dir>/expert-iteration+lora/<learner>[/<teacher>]/``; the held-out evaluation
    goes to ``results/<learner>+expert-iteration+lora-[<teacher>-]checkpoint-N/``.
    """

    config_class = ExpertIterationConfig
    kind = "expert-iteration+lora"

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter of another base model; a teacher with no role to play
        check_init_adapter(config.init_adapter, learner)
        if teacher and not split_list(config.roles):
            raise TrainingSetupError(f"with a teacher (-t {teacher}) pass --roles ROLE[,ROLE]: the roles the "
                                     f"learner plays and learns (the teacher plays the others)")

    def learn(self, game_registry) -> None:
        cfg, learner = self.config, self.learner
        partner = lifecycle.safe_name(self.teacher.name) if self.teacher is not None else None
        run_name = f"{self.kind}/{lifecycle.safe_name(learner.name)}" + (f"/{partner}" if partner else "")
        # refuses now (not after playing) to overwrite checkpoints or another run's results
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / run_name, cfg.game_list,
                                    eval_prefix=f"{learner.name}+{self.kind}-" + (f"{partner}-" if partner else ""))
        try:
            play = RoundPlayer(self, self.output_dir / run_name)
        except BaseException:
            run.lock.release()
            raise
        kept = train_rounds(self, run, play)
        run.finish(self._players(play), partner=partner, rounds=cfg.rounds, kept_per_round=kept,
                   records=str(self.output_dir / run_name))

    def _players(self, play: RoundPlayer) -> Optional[list]:
        """The held-out evaluation's players: the learner in its role's slot, the teacher in
        the others. One order serves every game and a one-player game takes the first, so
        when the games want the learner in different slots it plays slot 1 everywhere and
        the games where that is not its role are named (evaluate those with ``playpen eval``)."""
        if self.teacher is None:
            return None
        orders = {game: [self.learner if n in play.roles else self.teacher for n in play.game_roles[game]]
                  for game in self.config.game_list}
        slots = {game: next(i for i, player in enumerate(order) if player is self.learner)
                 for game, order in orders.items() if any(player is self.learner for player in order)}
        if len(set(slots.values())) <= 1:
            return max(orders.values(), key=len)
        moved = sorted(game for game, slot in slots.items() if slot != 0)
        print(f"[playpen] the final evaluation seats the learner in slot 1 of every game; in {', '.join(moved)} "
              f"that is not its role: evaluate those with `playpen eval`", flush=True)
        return [self.learner, self.teacher]

def train_rounds(trainer, run, play: RoundPlayer) -> list[int]:
    """Every round still to train (see the module's docstring); returns the rows kept per round."""
    cfg = trainer.config
    bounds = round_bounds(cfg.max_steps, cfg.rounds)
    start = lifecycle.checkpoint_step(run.resume_from) if run.resume_from else 0
    base = lifecycle.model_of(trainer.learner)
    policy, kept, demos = None, [], None
    for round_ in range(1, cfg.rounds + 1):
        first, last = bounds[round_ - 1], bounds[round_]
        if start >= last:
            continue
        if policy is None:
            policy = _starting_policy(base, cfg, run.run_dir, start)
        inside = start > first
        rows_file = run.run_dir / f"round-{round_}.jsonl"
        if inside and rows_file.exists():  # resumed inside this round: the same data
            records = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines() if line]
        else:
            records = play(round_, policy)
            if cfg.demo_share and records:  # the anchor (--demo-share): made once, on the first round with wins
                demos = demos or Demonstrations(trainer, play.records_dir, lifecycle.tokenizer_of(trainer.learner))
                records += demos.draw(len(records))
            write_jsonl(records, rows_file)
        own = sum(not r.get("meta", {}).get("demonstration") for r in records)
        kept.append(own)
        play.metrics["expert/demonstrations"] = len(records) - own
        mixed = f" + {len(records) - own} demonstrations" if len(records) > own else ""
        print(f"[playpen] round {round_}/{cfg.rounds}: {own} won trajectories of the learner{mixed} "
              f"({rows_file})", flush=True)
        if not records:
            continue  # nothing won: the next round trains these steps too
        sft_trainer = _sft_trainer(trainer, run, policy, records, last, fresh=policy is base, inside=inside,
                               metrics=lambda: dict(play.metrics))
        run.resume_from = str(run.run_dir / f"checkpoint-{start}") if start else None
        run.train(sft_trainer)
        policy = sft_trainer.model
        start = int(sft_trainer.state.global_step)
        if run.interrupt.requested or start < last:
            break
    if run.checkpoint is None and not run.interrupt.requested:
        run.lock.release()
        hints = [h for h, wanted in (("start from a warm-up adapter (--init-adapter)", not cfg.init_adapter),
                                     ("sample more (--samples-per-instance, --instances-per-round)", True),
                                     ("play with a teacher (-t)", trainer.teacher is None)) if wanted]
        raise DatasetError(f"the learner won no episode in {cfg.rounds} round(s) of {cfg.samples_per_instance} "
                           f"samples per instance: nothing to imitate; {', or '.join(hints)}")
    return kept


class Demonstrations:
    """``--demo-share``: the programmatic players' won training episodes of ``--demo-roles``
    (every role when empty), played once, drawn in a seeded order round after round so that
    they make that share of each round's rows."""

    def __init__(self, trainer, records_dir: Path, tokenizer):
        cfg = trainer.config
        rows = demonstration_rows(cfg.game_list, split_list(cfg.demo_roles), cfg.train_instances, records_dir,
                                  tokenizer, trainer.seed, cfg.train_items)
        if not rows:
            raise DatasetError(f"--demo-share: the programmatic players won no training episode of "
                               f"{', '.join(cfg.game_list)} to mix in")
        self.rows = [{"input_ids": list(r["input_ids"]), "assistant_masks": list(r["assistant_masks"]),
                      "meta": {"demonstration": True}} for r in rows]
        random.Random(trainer.seed).shuffle(self.rows)
        self.share, self.cursor = cfg.demo_share, 0

    def draw(self, own: int) -> list[dict]:
        """Demonstration rows that make ``share`` of a round with ``own`` rows of its own."""
        count = round(own * self.share / (1.0 - self.share))
        out = [self.rows[(self.cursor + i) % len(self.rows)] for i in range(count)]
        self.cursor += count
        return out


def _starting_policy(base, cfg, run_dir: Path, start: int):
    """A resumed run: the adapter of checkpoint-START; else --init-adapter, or the base
    model (a fresh adapter comes with the first round's trainer)."""
    if start:
        return load_init_adapter(base, run_dir / f"checkpoint-{start}")
    if cfg.init_adapter:
        return load_init_adapter(base, cfg.init_adapter)
    return base


def _sft_trainer(trainer, run, policy, records: list[dict], last: int, *, fresh: bool, inside: bool, metrics):
    """TRL's SFTTrainer for one round: steps up to `last` on the round's rows (token ids
    with the learner's generated tokens as the only targets)."""
    from datasets import Dataset
    from trl import SFTTrainer
    cfg = trainer.config
    rows = [{"input_ids": r["input_ids"][:cfg.max_length], "assistant_masks": r["assistant_masks"][:cfg.max_length]}
            for r in records]
    rows = [r for r in rows if any(r["assistant_masks"])]
    if not rows:
        raise DatasetError(f"every kept turn lies beyond --max-length {cfg.max_length}: raise it")
    random.Random(trainer.seed + last).shuffle(rows)
    # a resumed round re-reads its own rows: only then does the data loader skip the steps done
    args = sft_args(cfg, run.run_dir, trainer.seed, max_steps=last, **checkpointing_args(True),
                    ignore_data_skip=not inside)
    return SFTTrainer(model=policy, args=args, train_dataset=Dataset.from_list(rows),
                      processing_class=lifecycle.tokenizer_of(trainer.learner),
                      peft_config=cfg.lora_config() if fresh else None,
                      callbacks=[run.trainer_callback(extra_metrics=metrics)])
