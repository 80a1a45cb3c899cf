"""Hierarchical GRPO with LoRA on proposer-solver: the learner proposes arithmetic problems
and solves them; a proposal is rewarded by how close its solvers come to solving half.

    playpen run examples/trl/hierarchical_grpo_trainer_lora.py -l smol-135m -T 1.0 -L 40
    playpen run examples/trl/hierarchical_grpo_trainer_lora.py -l smol-135m --solver programmatic
    playpen run examples/trl/hierarchical_grpo_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash

Each optimizer step takes ``--proposer-groups`` training instances of ``arith_proposer``
(numbers to build a problem from). Each is played ``--num-generations`` (G) times; every
proposal with a valid problem starts G ``arith_solver`` episodes on it, in the same
batched loop (docs/hierarchical.md). The proposer's reward is 1 - |2 r - 1| (r: the share
of its solver episodes won), the solvers' the game's outcome reward. A proposal without a
valid problem keeps its game reward and its solvers get a problem from the instance store
(problems earlier proposals got half-solved, saved with the run as instance-store.json and
resumed with it), else from the solver game's training instances.

The step trains one group of G proposals per proposer instance and, with ``--solver self``,
the G solver groups of its proposals (credit ``--credit hierarchical``: groups by level,
episode type, role and group; ``--baseline``, ``--role-baselines`` as in the other GRPO
trainers, e.g. ``--role-baselines Proposer:running``). ``--solver programmatic`` or a
registered model name: frozen solvers, only the proposer is trained. Rows older than
``--max-policy-lag`` optimizer steps are dropped or clipped (``--off-policy``).

``--rubric FILE`` (docs/rubrics.md): the per-player rewards of one level's game from a rubric
file (outcome, scores, checks, judges), e.g. the solvers' reward plus a brevity check; a rubric
for ``arith_proposer`` replaces the proposer's reward, so keep it with a term of kind
``reward`` (the rollout's reward, 1 - |2 r - 1|) and add to it. Checked before any model loads.

Records go to ``<output_dir>/hierarchical-grpo+lora/<learner>/<solver>/`` (one run folder
per step, every episode scorable by ``clem score``; a proposer's episode.json links its
solver episodes), checkpoints to ``models/hierarchical-grpo+lora/<learner>/<solver>/``,
metrics (``reward/<level>/<role>/mean``, ``advantage/<level>/<role>/mean``,
``hierarchy/solve_rate``, ``store/size``, ...) to ``playpen-log.jsonl`` there. At the end
the adapter is evaluated on the held-out instances of both games.

The same trainer by name: ``playpen run hierarchical-grpo ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/hierarchy/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.hierarchy.trainer import HierarchicalGRPOTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
