"""Online GRPO with LoRA in self-play: the learner plays every role of the games.

    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --resume      # after Ctrl-C or a crash

Each optimizer step plays ``--groups-per-step`` groups. A group is one training instance
and one role, played ``--num-generations`` times; the role's turns in those episodes are
trained with that role's reward (default: outcome reward, aborted < lose < success, graded
by the game's Main Score), normalised within the group. Game-master and partner tokens
are masked out of the loss. In self-play the roles of an instance share its episodes.
``-T`` is the sampling temperature of the rollouts (0 is replaced by 1.0: greedy groups
carry no signal) and ``-L`` the tokens per turn.

Records of every episode go to ``<output_dir>/grpo+lora/<learner>/selfplay/`` (clemcore
layout: ``clem score``/``transcribe`` work on them), checkpoints (adapters) to
``models/grpo+lora/<learner>/selfplay/checkpoint-N``, metrics (loss, reward per role,
% played, KL, tokens/s) to ``playpen-log.jsonl`` and ``learning-curve.png`` there and to the
tracker of ``--report-to``. At the end the adapter is evaluated on the held-out instances.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from playpen import grpo, training
from playpen.base import BasePlayPen
from playpen.callbacks import CallbackList, JsonlLogCallback


@dataclass
class GRPOSelfPlayConfig:
    games: str = field(default="referencegame", metadata={"help": "games to train on (comma-separated)"})
    roles: str = field(default="", metadata={"help": "roles to train (comma-separated; empty = all)"})
    train_instances: str = field(default="instances_train", metadata={"help": "instances file to train on"})
    max_steps: int = field(default=50, metadata={"help": "optimizer steps"})
    num_generations: int = field(default=4, metadata={"help": "group size: episodes per instance and role"})
    groups_per_step: int = field(default=2, metadata={"help": "groups (instance x role) per optimizer step"})
    learning_rate: float = field(default=5e-5, metadata={"help": "learning rate"})
    beta: float = field(default=0.02, metadata={"help": "KL coefficient (0 = no KL, no reference pass)"})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    lora_dropout: float = field(default=0.0, metadata={
        "help": "LoRA dropout, also applied to --init-adapter (0: none, as RL wants; it costs CPU time too)"})
    target_modules: str = field(default="all-linear", metadata={"help": "LoRA target modules"})
    init_adapter: str = field(default="", metadata={"help": "start from this adapter (e.g. an SFT checkpoint)"})
    reward: str = field(default="outcome", metadata={"help": "outcome (graded) or binary (1 = success)"})
    max_concurrent_episodes: int = field(default=16, metadata={"help": "episodes generated together"})
    save_steps: int = field(default=10, metadata={"help": "save a checkpoint every N steps (and at the end)"})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept"})
    models_dir: str = field(default="models", metadata={"help": "root of the checkpoint folders"})
    results_dir: str = field(default="results", metadata={"help": "root of the evaluation results"})
    report_to: str = field(default="none", metadata={"help": "tracker: none, trackio, tensorboard, wandb"})
    resume: bool = field(default=False, metadata={"help": "continue from the last checkpoint"})
    overwrite: bool = field(default=False, metadata={
        "help": "start over although checkpoints (and their evaluation results) exist"})
    evaluate: bool = field(default=True, metadata={"help": "evaluate on the held-out instances at the end"})
    eval_max_instances: int = field(default=0, metadata={"help": "held-out instances per experiment (0 = all)"})
    eval_batch_size: int = field(default=16, metadata={"help": "episodes generated together in evaluation"})


class GRPOSelfPlayTrainer(BasePlayPen):
    """GRPO with LoRA; the learner plays every role (self-play)."""

    config_class = GRPOSelfPlayConfig

    def partner(self):
        return None, "selfplay"  # nobody: the learner plays all roles

    def learn(self, game_registry) -> None:
        from peft import LoraConfig, PeftModel
        from playpen.rewards import BinaryReward, OutcomeReward
        from playpen.rollout import SamplingConfig
        from trl import GRPOConfig, GRPOTrainer

        cfg = self.config
        games = training.split_list(cfg.games)
        teacher, partner_name = self.partner()
        run_name = f"grpo+lora/{training.safe_name(self.learner.name)}/{partner_name}"
        # refuses now (not after training) to overwrite checkpoints or another run's results
        run = training.TrainingRun(self, Path(cfg.models_dir) / run_name, games,
                                   eval_prefix=f"{self.learner.name}+grpo+lora-{partner_name}-")
        if cfg.reward not in ("outcome", "binary"):
            raise grpo.GRPOSetupError(f"--reward must be outcome or binary, got '{cfg.reward}'")
        if not 0.0 <= cfg.lora_dropout < 1.0:
            raise grpo.GRPOSetupError(f"--lora-dropout must be in [0, 1), got {cfg.lora_dropout}")

        # 1. the groups: (training instance, role) slots, an instance's roles side by side
        per_instance, game_roles = grpo.training_slots(games, training.split_list(cfg.roles), cfg.train_instances)
        rows_per_step = cfg.groups_per_step
        dataset = grpo.slot_dataset(per_instance, rows_per_step * cfg.max_steps, self.seed)
        roles = sorted({s.role for slots in per_instance for s in slots})
        reward_funcs, reward_weights = grpo.reward_functions(roles)

        # 2. the rollout function: plays the slots' episodes with the current policy; every
        #    finished episode is reported to the callbacks and the run's JSON log
        episode_callbacks = CallbackList([self.callbacks, JsonlLogCallback(run.run_dir / training.LOG_FILE)])
        gen = dict(getattr(self.learner, "gen_args", {}) or {})
        temperature = float(gen.get("temperature", 0.0)) or 1.0
        tokenizer = training.tokenizer_of(self.learner)
        rollout_func = grpo.GameRollout(
            self.learner.name, tokenizer, num_generations=cfg.num_generations, game_roles=game_roles,
            teacher=teacher, sampling=SamplingConfig(temperature=temperature,
                                                     max_new_tokens=int(gen.get("max_tokens", 300))),
            records_dir=self.output_dir / run_name, callbacks=episode_callbacks,
            reward_fn=BinaryReward() if cfg.reward == "binary" else OutcomeReward(),
            max_concurrent_episodes=cfg.max_concurrent_episodes, instances=cfg.train_instances,
            seed=self.seed)

        # 3. TRL: adapters only; the reference policy for the KL term is the adapter-free base
        model = training.model_of(self.learner)
        peft_config = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                 target_modules=training.target_modules(cfg.target_modules), task_type="CAUSAL_LM")
        if cfg.init_adapter:
            from playpen.evaluation import check_adapter
            model = PeftModel.from_pretrained(model, str(check_adapter(cfg.init_adapter)), is_trainable=True)
            training.set_lora_dropout(model, cfg.lora_dropout)
            peft_config = None
        args = GRPOConfig(
            output_dir=str(run.run_dir), max_steps=cfg.max_steps, learning_rate=cfg.learning_rate, beta=cfg.beta,
            num_generations=cfg.num_generations, per_device_train_batch_size=cfg.num_generations * rows_per_step,
            gradient_accumulation_steps=1, shuffle_dataset=False, temperature=temperature,
            logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
            save_total_limit=cfg.save_total_limit, report_to=training.report_to(cfg.report_to), seed=self.seed,
            gradient_checkpointing=False, disable_tqdm=True, log_completions=False,
            reward_weights=reward_weights, dataloader_num_workers=0, **training.precision_kwargs())
        trainer = GRPOTrainer(
            model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
            processing_class=tokenizer, peft_config=peft_config, rollout_func=rollout_func,
            callbacks=[run.trainer_callback(extra_metrics=lambda: rollout_func.last_metrics)])

        # 4. train (Ctrl-C saves a checkpoint and stops); 5. evaluate the adapter (the learner
        #    carries it in memory) on the held-out instances, write the summary and the curve
        run.train(trainer)
        run.finish([self.learner] + ([teacher] if teacher is not None else []), partner=partner_name,
                   records=str(self.output_dir / run_name))
