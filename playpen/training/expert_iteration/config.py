"""The options of expert iteration: rounds of play, which episodes are kept, the SFT steps."""
from __future__ import annotations

from dataclasses import dataclass

from playpen.errors import TrainingSetupError
from playpen.training.common.config import LoraOptions, PrecisionOptions, RunConfig, option


@dataclass
class ExpertIterationOptions:
    """How each round plays the training instances and which of its episodes it imitates."""

    rounds: int = option(3, "rounds: each plays the training instances with the policy the previous round "
                            "ended with and trains --max-steps/--rounds SFT steps on its won episodes")
    instances_per_round: int = option(16, "training instances played per round (a seeded sample; 0 = all)")
    samples_per_instance: int = option(4, "episodes per instance and round (sampled: -T, 1.0 when greedy)")
    top_k: int = option(0, "keep at most this many won episodes per instance, the highest scores first "
                           "(0 = every won episode)")
    roles: str = option("", "roles the learner plays and learns (comma-separated; empty = every role: "
                            "self-play); with -t the teacher plays the others and its turns are never learned")
    init_adapter: str = option("", "start from this adapter (e.g. an SFT warm-up of the same base model)")
    batch_size: int = option(8, "conversations per optimizer step (per device)")
    gradient_accumulation_steps: int = option(1, "micro-batches per step")
    max_length: int = option(1024, "tokens per conversation (longer: truncated)")
    max_concurrent_episodes: int = option(16, "episodes played at once")
    demo_share: float = option(0.0, "share of each round's SFT rows that are demonstrations (the programmatic "
                                    "players' won training episodes of --demo-roles): an anchor against drift "
                                    "of the roles and turns the round's own wins do not cover (0 = none; < 1)")
    demo_roles: str = option("", "roles whose demonstrations --demo-share mixes in (comma-separated; empty = "
                                 "every role of the games)")


@dataclass
class ExpertIterationConfig(ExpertIterationOptions, PrecisionOptions, LoraOptions, RunConfig):
    """Expert iteration's rounds, LoRA and the run."""

    max_steps: int = option(30, "SFT optimizer steps (all rounds together)")

    def validate(self) -> None:
        super().validate()
        for name, low, valid in (("instances_per_round", 0, "an integer >= 0 (0 = all)"),
                                 ("samples_per_instance", 1, "an integer >= 1"),
                                 ("top_k", 0, "an integer >= 0 (0 = every won episode)")):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise TrainingSetupError(f"option --{name.replace('_', '-')}: {value!r} is not valid; "
                                         f"expected {valid}")
        if not isinstance(self.demo_share, (int, float)) or not 0.0 <= self.demo_share < 1.0:
            raise TrainingSetupError(f"option --demo-share: {self.demo_share!r} is not valid; expected a number "
                                     f"in [0, 1) (0 = no demonstrations)")
        if self.demo_roles and not self.demo_share:
            raise TrainingSetupError("option --demo-roles: needs --demo-share above 0")
        if self.max_steps < self.rounds:
            raise TrainingSetupError(f"--max-steps {self.max_steps} is fewer than --rounds {self.rounds}: "
                                     f"every round needs at least one step")
