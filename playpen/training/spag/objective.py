"""SPAG (self-play of adversarial language games) with LoRA: the loss, its data and options.

Two phases, each an adapter checkpoint (:mod:`playpen.training.spag.phases` runs them):

1. **Imitation** on demonstrations (programmatic or teacher episodes; each role's turns
   kept only from episodes that role won, by default): the SFT loss on the assistant
   tokens plus ``--imitation-kl`` times the KL divergence (over the whole vocabulary, at
   every assistant token) from the policy to the reference — the same model with the
   adapter disabled, never a second copy. :func:`imitation_loss`.
2. **SPAG epochs**: the learner plays both roles of the game against itself on sampled
   training instances; every player's side of an episode is one sample whose reward is
   the game's outcome for that role (:class:`RoleOutcomeReward`: win / tie / lose, and a
   penalty for the role that broke the format). Offline policy optimisation on those
   samples (:func:`spag_sample_loss`): per model token the importance ratio
   ``ρ = π_θ / π_ref`` is clipped to ``[1 − ε, 1 + ε]`` PPO-style, the advantage is
   ``A = r − β·KL`` with ``KL`` the sample's mean log-ratio (detached), and the loss is
   ``−mean_t min(ρ·A, clip(ρ)·A)``. π_ref's log-probabilities are computed once when the
   epoch starts, by the policy that played it (SPAG's reference: the previous epoch) or
   by the base model (``--spag-reference base``). Only the winners' samples are kept by
   default; each role's samples are reweighted so that every role weighs the same
   (:func:`role_weights`: attacker and defender half each); ``--sft-coef`` mixes the
   imitation loss's SFT term into every step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.data import DatasetFilter, conversational_records, episode_folders
from playpen.errors import DatasetError, TrainingSetupError
from playpen.outcomes import EpisodeOutcome, flag
from playpen.training.common.config import option, split_list
from playpen.inference.logprobs import sequence_logprobs
from playpen.training.common.losses import clipped_fraction, clipped_policy_loss
from playpen.training.sft.demonstrations import play_demonstrations, supervised_records, tokenize_conversation

REFERENCES = ("behaviour", "base")


@dataclass
class SPAGOptions:
    """Imitation, then epochs of self-play and offline policy optimisation."""

    games: str = option("adversarial_taboo", "games to train on (comma-separated; two-player adversarial "
                                             "games that log '<Role> Win' keys)")
    epochs: int = option(1, "SPAG epochs (self-play, rewards, optimisation), each ending with a checkpoint")
    max_steps: int = option(8, "optimizer steps of each SPAG epoch")
    imitation_steps: int = option(8, "optimizer steps of imitation before the epochs (0 = none)")
    imitation_kl: float = option(0.1, "imitation: coefficient of the KL to the reference (adapter disabled)")
    imitate_winners: bool = option(True, "imitation: keep a role's turns only from episodes that role won "
                                         "(needs a results folder: --records or the played demonstrations)")
    episodes_per_epoch: int = option(16, "self-play episodes each epoch (training instances, sampled)")
    beta: float = option(0.1, "advantage = reward - beta * KL(policy || reference)")
    clip: float = option(0.2, "importance ratio clipped to [1 - clip, 1 + clip]")
    winners_only: bool = option(True, "learn only from the winning side's samples (ties and losses dropped)")
    role_balance: bool = option(True, "reweight samples so that every role (attacker, defender) weighs half")
    sft_coef: float = option(0.0, "weight of an SFT loss on the imitation data added to every SPAG step (0 = none)")
    spag_reference: str = option("behaviour", "reference of the ratio and the KL: behaviour (the policy that "
                                              "played the epoch) or base (the adapter disabled)")
    win_reward: float = option(1.0, "reward of the winning role")
    tie_reward: float = option(0.0, "reward of both roles in a tie")
    lose_reward: float = option(-1.0, "reward of the losing role")
    abort_reward: float = option(-1.0, "reward of the role that broke the format (the other gets the tie reward)")
    init_adapter: str = option("", "start from this adapter (e.g. an SFT checkpoint of the same base model)")
    max_concurrent_episodes: int = option(16, "self-play episodes generated together")
    learning_rate: float = option(1e-4, "learning rate")
    outcomes: str = option("success,failure", "imitation: episode outcomes to learn from (before --imitate-winners)")
    save_steps: int = option(10, "not used: SPAG saves a checkpoint at each phase's end (imitation, SPAG-1..N)")
    save_total_limit: int = option(2, "not used: every phase's checkpoint is kept")

    def validate(self) -> None:
        super().validate()
        if self.spag_reference not in REFERENCES:
            raise TrainingSetupError(f"option --spag-reference: {self.spag_reference!r} is not valid; expected "
                                     f"{' or '.join(REFERENCES)}")
        if not self.lose_reward < self.tie_reward < self.win_reward:
            raise TrainingSetupError(f"rewards must order lose < tie < win, got --lose-reward {self.lose_reward}, "
                                     f"--tie-reward {self.tie_reward}, --win-reward {self.win_reward}")


# ----------------------------------------------------------------------------- rewards

@dataclass(frozen=True)
class RoleOutcomeReward:
    """``(EpisodeOutcome, player_name, role) -> float`` from the game's ``<Role> Win`` and
    ``Tie`` episode scores (adversarial_taboo logs ``Attacker Win``, ``Defender Win``,
    ``Tie``, ``Attacker Aborted``, ``Defender Aborted``). An aborted episode costs
    ``aborted`` to the role whose ``<Role> Aborted`` is set and gives ``tie`` to the other
    (to every role when the scores do not say who). A game without such keys falls back
    to its outcome: success = win, failure = lose."""

    win: float = 1.0
    tie: float = 0.0
    lose: float = -1.0
    aborted: float = -1.0

    def __call__(self, outcome: EpisodeOutcome, player_name: str = "", role: str = "") -> float:
        scores = outcome.episode_scores or {}
        if outcome.outcome == "aborted":
            blamed = [k for k in scores if k.endswith(" Aborted") and flag(scores[k])]
            return self.aborted if not blamed or f"{role} Aborted" in blamed else self.tie
        winners = [k[:-len(" Win")] for k in scores if k.endswith(" Win") and flag(scores[k])]
        if winners:
            return self.win if role in winners else self.lose
        if flag(scores.get("Tie")):
            return self.tie
        if outcome.outcome == "success":
            return self.win
        return self.lose if outcome.outcome == "failure" else self.tie


def role_weights(roles: Sequence[str]) -> list[float]:
    """Weights of samples by role: every role present weighs the same in total and the
    weights average 1 (3 attacker + 1 defender samples: 2/3, 2/3, 2/3, 2)."""
    counts: dict[str, int] = {}
    for role in roles:
        counts[role] = counts.get(role, 0) + 1
    return [len(roles) / (len(counts) * counts[role]) for role in roles]


# ----------------------------------------------------------------------------- losses

def sample_kl(logps, ref_logps) -> float:
    """The sample's KL estimate: mean over its tokens of ``logp − ref_logp`` (no gradient)."""
    return float((logps.detach() - ref_logps).mean())


def spag_advantage(reward: float, kl: float, beta: float) -> float:
    """``A = r − β·KL``."""
    return reward - beta * kl


def spag_sample_loss(logps, ref_logps, reward: float, beta: float, clip: float) -> tuple[Any, dict]:
    """The offline policy loss of one sample (:func:`~playpen.training.common.losses.clipped_policy_loss`
    with ``A = r − β·KL``) and its numbers (kl, advantage, clipped fraction)."""
    ref_logps = ref_logps.to(logps.device)  # resumed samples come back from disk on the CPU
    kl = sample_kl(logps, ref_logps)
    advantage = spag_advantage(reward, kl, beta)
    return clipped_policy_loss(logps, ref_logps, advantage, clip), \
        {"kl": kl, "advantage": advantage, "clipped": clipped_fraction(logps, ref_logps, clip)}


def imitation_loss(model, ids: Sequence[int], mask: Sequence[int], kl_coef: float) -> tuple[Any, dict]:
    """SFT loss on the masked tokens plus ``kl_coef`` × KL(π_θ ‖ π_ref) over the vocabulary
    at those positions; π_ref = `model` with its adapter disabled."""
    import torch
    logps, rows = sequence_logprobs(model, ids, mask, full=True)
    nll = -logps.mean()
    if kl_coef == 0:
        return nll, {"nll": nll.item(), "kl": 0.0}
    with torch.no_grad(), model.disable_adapter():
        _, ref_rows = sequence_logprobs(model, ids, mask, full=True)
    kl = (rows.exp() * (rows - ref_rows)).sum(-1).mean()
    return nll + kl_coef * kl, {"nll": nll.item(), "kl": kl.item()}


# ----------------------------------------------------------------------------- samples

@dataclass
class Sample:
    """One player's side of a self-play episode: its token ids, 1 on its own tokens."""

    ids: list[int]
    mask: list[int]
    role: str
    reward: float
    ref_logps: Any = None


def episode_samples(episodes, win_reward: float, winners_only: bool) -> list[Sample]:
    """The learner's trajectories of played episodes as samples (side calls, failed
    episodes and trajectories without a model token are left out)."""
    out = []
    for episode in episodes:
        if episode.error is not None:
            continue
        for t in episode.trajectories:
            if t.side_call is not None or math.isnan(t.reward) or not any(t.env_mask):
                continue
            if winners_only and t.reward != win_reward:
                continue
            ids = list(t.prompt_ids) + list(t.completion_ids)
            out.append(Sample(ids, [0] * len(t.prompt_ids) + list(t.env_mask), t.role, float(t.reward)))
    return out


def winning_records(folder: str | Path, games: Sequence[str], roles: Sequence[str] = ()) -> list[dict]:
    """Records (``{messages, meta}``) of a results folder, each player's kept only when its
    role won its episode (``"<Role> Win"`` set in interactions.json)."""
    import json

    keep = DatasetFilter(games=tuple(games), roles=tuple(roles))
    out = []
    for episode in episode_folders(Path(folder)):
        try:
            interactions = json.loads((episode / "interactions.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        won = {k[:-len(" Win")] for k, v in interactions.items() if k.endswith(" Win") and flag(v)}
        if not won:
            continue
        records, _ = conversational_records(episode, include_programmatic=True)
        out += [r for r in records if r["meta"].get("game_role") in won and keep.keeps(r["meta"])]
    return out


def imitation_records(config, output_dir: str | Path) -> list[dict]:
    """The imitation data: :func:`~playpen.training.sft.supervised_records` (a dataset file,
    ``--records`` or demonstrations played by ``--demo-model``), with ``--imitate-winners``
    restricted to each role's won episodes (a dataset file has no episode scores: kept as is)."""
    records = supervised_records(config, output_dir)
    if not config.imitate_winners or config.dataset:
        return records
    if config.records:
        folder = Path(config.records)
    else:  # the demonstrations supervised_records just read (complete sets are not played again)
        folder = play_demonstrations(split_list(config.games), Path(output_dir) / "demonstrations",
                                     model=config.demo_model, instances=config.train_instances,
                                     max_instances=config.demo_max_instances or None, items=config.train_items)
    records = winning_records(folder, split_list(config.games), split_list(config.roles))
    if not records:
        raise DatasetError(f"no won episodes of {config.games} in {folder} to imitate (pass --no-imitate-winners "
                           f"to imitate every played episode)")
    return records


def tokenized_turns(records: Sequence[dict], tokenizer, max_length: int,
                    template_kwargs: Optional[dict] = None) -> list[tuple[list[int], list[int]]]:
    """(ids, assistant mask) of every record with an assistant token within `max_length`."""
    rows = []
    for record in records:
        row = tokenize_conversation(tokenizer, record["messages"], max_length, template_kwargs)
        if any(row["assistant_masks"][1:]):
            rows.append((row["input_ids"], row["assistant_masks"]))
    return rows
