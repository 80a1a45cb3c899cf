"""Hierarchical GRPO with LoRA on proposer-solver (``playpen run hierarchical-grpo``): the learner
proposes arithmetic problems and solves them; a proposal is rewarded by how close its solvers
come to solving half. :class:`HierarchicalGRPOTrainer`'s docstring is its documentation
(``playpen run hierarchical-grpo --help``); the rollout: docs/hierarchical.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from playpen.callbacks import CallbackList, JsonlLogCallback
from playpen.errors import TrainingSetupError
from playpen.models import load_init_adapter
from playpen.peft_internals import set_lora_dropout
from playpen.rewards import BinaryReward, OutcomeReward
from playpen.rollouts.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import LoraOptions, RunConfig, option
from playpen.training.common.plotting import LOG_FILE
from playpen.training.grpo import assembly, options
from playpen.training.grpo.advantages import BatchAdvantages
from playpen.training.grpo.objective import ObjectiveOptions
from playpen.training.grpo.mixes import check_partners
from playpen.training.grpo.assembly import load_rubric
from playpen.training.grpo.rollout_bridge import reward_functions
from playpen.training.grpo.steps import GRPOStepOptions
from playpen.training.grpo.watch import STOP_HELP, stop_reason
from playpen.training.grpo.trainer import grpo_args
from playpen.training.hierarchy.instance_store import InstanceStore
from playpen.training.hierarchy.proposer_solver import (PROPOSER, PROPOSER_GAME, SOLVER, SOLVER_GAME,
                                                        HierarchicalRollout, proposer_instances, slot_rows)
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.rubrics.files import RUBRIC_HELP


@dataclass
class HierarchicalOptions(ObjectiveOptions):
    """Hierarchical GRPO on proposer-solver (and --baseline, --role-baselines, --max-policy-lag, ... as in
    the other GRPO trainers)."""

    games: str = option("arith_proposer,arith_solver", "games evaluated at the end (training plays the hierarchy)")
    num_generations: int = option(4, "proposals per proposer instance, and solver episodes per proposal")
    proposer_groups: int = option(1, "proposer instances per optimizer step")
    solver: str = option("self", "who solves: self (the learner), programmatic or a registered model (frozen)")
    train_solvers: bool = option(True, "with --solver self, train the solver groups too")
    store_capacity: int = option(500, "problems kept in the instance store")
    beta: float = option(0.02, "KL coefficient (0 = no KL, no reference pass)")
    init_adapter: str = option("", "start from this adapter (e.g. an SFT checkpoint)")
    reward: str = option("outcome", "the solvers' reward: outcome (graded) or binary (1 = solved)")
    max_concurrent_episodes: int = option(32, "episodes generated together (proposers and solvers)")
    max_steps: int = option(20, "optimizer steps")
    learning_rate: float = option(5e-5, "learning rate")
    lora_dropout: float = option(0.0, "LoRA dropout (0: the trained policy is the one that played)")
    credit: str = option("hierarchical", "hierarchical (groups by level, episode type, role, group) or flat")
    stop_without_signal: int = option(10, STOP_HELP)
    rubric: str = option("", RUBRIC_HELP.replace("instead of --reward", "instead of the level's reward; for "
                                                "arith_proposer, a term of kind reward keeps 1 - |2 r - 1|"))

    def validate(self) -> None:
        super().validate()  # the run's and LoRA's options (the classes after this one)
        options.validate_credit(self)
        options.validate_stop(self)
        if self.reward not in ("outcome", "binary"):
            raise TrainingSetupError(f"option --reward: '{self.reward}' is not valid; expected outcome or binary")
        if self.proposer_groups < 1 or self.store_capacity < 1:
            raise TrainingSetupError("options --proposer-groups and --store-capacity: expected integers >= 1")


def run_folder(config, learner: str) -> str:
    return f"hierarchical-grpo+lora/{lifecycle.safe_name(learner)}/{config.solver}"


def store_file(config, learner: str) -> Path:
    return Path(config.models_dir) / run_folder(config, learner) / "instance-store.json"


@dataclass
class HierarchicalGRPOConfig(HierarchicalOptions, GRPOStepOptions, LoraOptions, RunConfig):
    """Every option: hierarchical GRPO, the step's micro-batches, LoRA, the run."""


class HierarchicalGRPOTrainer(BasePlayPen):
    """GRPO with LoRA over the proposer-solver hierarchy: propose arithmetic problems, solve them.

        playpen run hierarchical-grpo -l smol-135m -T 1.0 -L 40
        playpen run hierarchical-grpo -l smol-135m --solver programmatic --role-baselines Proposer:running
        playpen run hierarchical-grpo -l smol-135m --rubric proposer-rubric.json
        playpen run hierarchical-grpo -l smol-135m --resume     # after Ctrl-C or a crash

    Each optimizer step takes ``--proposer-groups`` training instances of ``arith_proposer``
    (numbers to build a problem from), each played ``--num-generations`` (G) times; every
    proposal with a valid problem starts G ``arith_solver`` episodes on it in the same batched
    loop (docs/hierarchical.md). The proposer's reward is 1 - |2 r - 1| (r: the share of its
    solver episodes won), the solvers' the game's outcome reward. A proposal without a valid
    problem keeps its game reward and its solvers get a problem from the instance store
    (problems earlier proposals got half-solved), else from the solver game's training
    instances. The step trains one group of G proposals per proposer instance and, with
    ``--solver self``, the G solver groups of its proposals (``--credit hierarchical``:
    groups by level, episode type, role and group); ``--solver programmatic`` or a registered
    model: frozen solvers, only the proposer trains. A ``--rubric`` for ``arith_proposer``
    replaces the proposer's reward: keep a term of kind ``reward`` (1 - |2 r - 1|) and add to it.

    Outputs: ``models/hierarchical-grpo+lora/<learner>/<solver>/`` holds ``checkpoint-N``,
    ``instance-store.json`` (resumed with the run), ``playpen-log.jsonl``
    (``reward/<level>/<role>/mean``, ``advantage/<level>/<role>/mean``,
    ``hierarchy/solve_rate``, ``store/size``, ...), ``learning-curve.png`` and
    ``playpen-run.json``; records under ``<output_dir>/hierarchical-grpo+lora/<learner>/<solver>/``
    (one run folder per step, every episode scorable by ``clem score``; a proposer's
    episode.json links its solver episodes); the held-out evaluation of both games in
    ``results/<learner>+hierarchical-grpo+lora-<solver>-checkpoint-N/``.
    """

    config_class = HierarchicalGRPOConfig

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: the init adapter's base model, the solver's name, roles named
        check_init_adapter(config.init_adapter, learner)
        if config.solver not in ("self", "programmatic"):
            check_partners({config.solver: 1.0}, learner, teacher)
        named = options.role_baselines(config)
        if named:
            options.check_roles(named, [PROPOSER_GAME, SOLVER_GAME], config.train_instances, "--role-baselines")
        options.check_rubric(config, [PROPOSER_GAME, SOLVER_GAME])
        store = store_file(config, learner)
        if store.exists() and not (config.resume or config.overwrite):
            raise TrainingSetupError(f"{store} holds the instance store of an earlier run: pass --resume to "
                                     f"continue it or --overwrite to start over")

    def learn(self, game_registry) -> None:
        from datasets import Dataset

        from playpen.training.trl_trainers import PlaypenGRPOTrainer

        cfg = self.config
        size = cfg.num_generations
        run_name = run_folder(cfg, self.learner.name)
        # 1. the instance store: saved with the run after every step, resumed with --resume (check()
        #    refused to replace one without --overwrite)
        store_path = store_file(cfg, self.learner.name)
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / run_name, cfg.game_list,
                                    eval_prefix=f"{self.learner.name}+hierarchical-grpo+lora-{cfg.solver}-")
        store = InstanceStore.load(store_path, cfg.store_capacity) if store_path.exists() and cfg.resume \
            else InstanceStore(cfg.store_capacity)

        # 2. the groups: per proposer instance, one group of proposals and (learner solvers
        #    trained) one group of solver episodes per proposal; the rollout plays them all
        solver_slots = size if cfg.solver == "self" and cfg.train_solvers else 0
        dataset = Dataset.from_list(slot_rows(proposer_instances(cfg.train_instances, cfg.train_items),
                                              cfg.max_steps * cfg.proposer_groups, solver_slots, self.seed))
        reward_funcs, reward_weights = reward_functions([PROPOSER, SOLVER])
        sampling = SamplingConfig.from_gen_args(getattr(self.learner, "gen_args", None))
        sampling = replace(sampling, temperature=sampling.temperature or 1.0)
        tokenizer = lifecycle.tokenizer_of(self.learner)
        reward_fn = BinaryReward() if cfg.reward == "binary" else OutcomeReward()
        rollout_func = HierarchicalRollout(
            self.learner.name, tokenizer, num_generations=size,
            solver="learner" if cfg.solver == "self" else cfg.solver, train_solvers=cfg.train_solvers,
            sampling=sampling, records_dir=self.output_dir / run_name, store=store, store_path=store_path,
            instances=cfg.train_instances, items=cfg.train_items, seed=self.seed, reward_fn=reward_fn,
            learning_rate=cfg.learning_rate,
            max_concurrent_episodes=cfg.max_concurrent_episodes,
            callbacks=CallbackList([self.callbacks, JsonlLogCallback(run.run_dir / LOG_FILE)]),
            rubric=load_rubric(cfg.rubric, self.learner, run.run_dir))
        advantages = assembly.make_advantages(cfg, {PROPOSER_GAME: [PROPOSER], SOLVER_GAME: [SOLVER]}, reward_fn)
        advantages.hint = ("Start from a supervised adapter (`playpen run sft`, then --init-adapter "
                           "models/sft+lora/<learner>/checkpoint-N) or let a competent solver answer "
                           "(--solver programmatic).")
        guard = assembly.make_guard(cfg)
        model, peft_config = lifecycle.model_of(self.learner), cfg.lora_config()
        if cfg.init_adapter:
            model = load_init_adapter(model, cfg.init_adapter)
            set_lora_dropout(model, cfg.lora_dropout)
            peft_config = None

        def extra_metrics() -> dict:
            return {**rollout_func.last_metrics, **advantages.metrics, **advantages.advantage_metrics,
                    **guard.metrics}

        # 3. TRL: adapters only; the KL reference is the adapter-free base (or the init adapter)
        batch = size * cfg.proposer_groups * (1 + solver_slots)
        args = grpo_args(cfg, run.run_dir, rows=batch, num_generations=size, temperature=sampling.temperature,
                         reward_weights=reward_weights, seed=self.seed, engine=sampling.engine)
        # the advantages of --credit/--baseline per level and role; stale rows dropped or clipped
        trainer = PlaypenGRPOTrainer(
            model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=tokenizer,
            peft_config=peft_config, rollout_func=rollout_func,
            callbacks=[run.trainer_callback(
                extra_metrics=extra_metrics,
                stop_when=lambda: stop_reason(cfg.stop_without_signal, advantages, rollout_func.watch))],
            advantages=BatchAdvantages(advantages, lambda: rollout_func.last_rows, guard))

        # 4. train (Ctrl-C saves a checkpoint and stops); 5. evaluate on the held-out instances
        run.train(trainer)
        run.finish([self.learner], partner=cfg.solver, records=str(self.output_dir / run_name),
                   store=str(store_path), store_size=len(store))
