"""Episodes that contain episodes (playpen.rollouts.hierarchy) on the proposer-solver task:
nesting and links (trajectories, episode.json, every sub-episode scorable by `clem score`),
a failing sub-episode fails only itself and the parent's reward is as defined, sub-episodes
batched with other episodes, the instance store (save, resume, weighted draws), and bad
input."""
import json
import math
import random

import pytest

from rollout_helpers import GenerateSpy, make_learner

from playpen.errors import RolloutError, TrainingSetupError
from playpen.rollouts import InstanceRef
from playpen.rollouts.hierarchy import HierarchicalTask, Level, SubEpisodes, rollout_hierarchy
from playpen.training.hierarchy.instance_store import InstanceStore
from playpen.training.hierarchy.proposer_solver import ProposerSolverTask, proposer_reward, solve_rate

PROPOSER_REFS = [InstanceRef("arith_proposer", "four_numbers", 0), InstanceRef("arith_proposer", "four_numbers", 1)]


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_proposer_reward_and_solve_rate_definitions():
    assert [proposer_reward(r) for r in (0.0, 0.25, 0.5, 1.0)] == [0.0, 0.5, 1.0, 0.0]
    assert math.isnan(proposer_reward(None))


def test_programmatic_levels_nest_and_link(tiny_workspace, tiny_pair, clem_here):
    task = ProposerSolverTask(num_solvers=3, solver="programmatic", proposer="programmatic")
    result = rollout_hierarchy(task, make_learner(tiny_pair), instances=PROPOSER_REFS,
                               records_dir=tiny_workspace / "records", run_name="tree")
    parents, children = result.at_level("proposer"), result.at_level(1)
    assert len(parents) == 2 and len(children) == 6 and len(result.episodes) == 8
    assert [e.game for e in result.episodes] == ["arith_proposer", *["arith_solver"] * 3] * 2  # parents first
    run = result.run_dir
    for parent in parents:
        node = result.nodes[parent.episode_id]
        assert node.level == 0 and node.parent_id is None and len(node.children) == 3
        kids = result.children_of(parent.episode_id)
        assert [k.outcome for k in kids] == ["success"] * 3  # the programmatic solver computes exactly
        assert len({k.group_id for k in kids}) == 1 and kids[0].group_id != parent.group_id
        # every solver solved it: trivial, the proposer's reward is 0 (the panel's score stays in Main Score)
        assert parent.rewards == {"Player 1": 0.0} and parent.main_score == 100.0
        meta = read(parent.path / "episode.json")
        assert meta["rewards"] == {"Player 1": 0.0} and meta["game_rewards"]["Player 1"] > 0.6
        assert meta["hierarchy"]["level"] == 0 and meta["hierarchy"]["parent"] is None
        assert [c["outcome"] for c in meta["hierarchy"]["children"]] == ["success"] * 3
        for link, kid in zip(meta["hierarchy"]["children"], kids):
            assert (run / link["path"]) == kid.path and link["episode_id"] == kid.episode_id
            kid_meta = read(kid.path / "episode.json")
            assert kid_meta["hierarchy"]["parent"] == {"episode_id": parent.episode_id, "path": node.path}
            assert kid_meta["hierarchy"]["level"] == 1 and kid_meta["hierarchy"]["episode_type"] == "arith_solver"
            assert read(kid.path / "instance.json")["problem"] == read(parent.path / "interactions.json")["Problem"]
    # every episode folder, parents and sub-episodes, is scored by clem's own scorer
    clem_here(["score", "-r", str(run)], cwd=tiny_workspace)
    scored = sorted(run.glob("*/*/*/instance_*/scores.json"))
    assert len(scored) == 8
    solver_scores = [read(p)["episode scores"]["Main Score"] for p in scored if "arith_solver" in str(p)]
    assert solver_scores == [100.0] * 6


def test_learner_trajectories_carry_level_type_trainable_and_version(tiny_workspace, tiny_pair):
    task = ProposerSolverTask(num_solvers=2, proposer="programmatic", train_solvers=False)
    result = rollout_hierarchy(task, make_learner(tiny_pair, max_new_tokens=4), instances=PROPOSER_REFS[:1],
                               records_dir=None, policy_version=7)
    solvers = result.at_level("solver")
    assert len(solvers) == 2 and all(e.outcome == "aborted" for e in solvers)  # a random model's answer
    trajectories = result.trajectories
    assert len(trajectories) == 2  # the learner played the solvers only
    for t in trajectories:
        assert (t.level, t.episode_type, t.trainable, t.policy_version, t.role) == (1, "arith_solver", False, 7,
                                                                                    "Solver")
    parent, = result.at_level(0)
    assert parent.rewards == {"Player 1": 0.0}  # aborted solvers did not solve it: r = 0


class _WithBrokenChild(ProposerSolverTask):
    """Each valid proposal also gets one sub-episode whose instance the solver game refuses."""

    def spawn(self, parent):
        requests = list(super().spawn(parent))
        if parent.level == "proposer":
            requests.append(SubEpisodes("solver", {"problem": "3 +"}, 1, {"name": "proposed"}))
        return requests


def test_a_failing_sub_episode_fails_only_itself(tiny_workspace, tiny_pair):
    task = _WithBrokenChild(num_solvers=2, solver="programmatic", proposer="programmatic")
    result = rollout_hierarchy(task, make_learner(tiny_pair), instances=PROPOSER_REFS[:1],
                               records_dir=tiny_workspace / "records", run_name="broken")
    parent, = result.at_level(0)
    kids = result.children_of(parent.episode_id)
    assert [k.outcome for k in kids] == ["success", "success", "error"]
    assert "ProblemFormatError" in kids[2].error and (kids[2].path / "error.json").exists()
    assert parent.outcome == "success" and parent.error is None
    # the error is left out of the solve rate: 2 of 2 solved (counted as a loss it would be 2/3 -> 2/3)
    assert solve_rate(kids) == 1.0 and parent.rewards == {"Player 1": 0.0}
    links = read(parent.path / "episode.json")["hierarchy"]["children"]
    assert [c["outcome"] for c in links] == ["success", "success", "error"]


class _AllBroken(ProposerSolverTask):
    def spawn(self, parent):
        if parent.level != "proposer":
            return []
        self.problems[parent.result.episode_id] = "3 +"
        return [SubEpisodes("solver", {"problem": "3 +"}, 2)]


def test_without_a_usable_sub_episode_the_parent_is_unscored(tiny_workspace, tiny_pair):
    result = rollout_hierarchy(_AllBroken(solver="programmatic", proposer="programmatic"), make_learner(tiny_pair),
                               instances=PROPOSER_REFS[:1], records_dir=None)
    parent, = result.at_level(0)
    assert [k.outcome for k in result.children_of(parent.episode_id)] == ["error", "error"]
    assert math.isnan(parent.rewards["Player 1"])


def test_sub_episodes_join_the_running_batch(tiny_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    # the learner proposes (a random model: no valid problem), so each proposal's solver slots
    # get a problem from the fallback list, played by the learner too
    task = ProposerSolverTask(num_solvers=1, fallback=["3 + 4 * 5"], rng=random.Random(0))
    refs = [InstanceRef("arith_proposer", "four_numbers", i) for i in range(3)]
    result = rollout_hierarchy(task, make_learner(tiny_pair, max_new_tokens=3), instances=refs,
                               max_concurrent_episodes=2, records_dir=None)
    assert len(result.at_level(0)) == 3 and len(result.at_level(1)) == 3
    # step 1: proposers 1, 2; step 2: proposer 3 AND the first sub-episode in one generate
    assert spy.batch_sizes[:2] == [2, 2]
    assert sum(spy.batch_sizes) == 6
    for parent in result.at_level(0):
        assert parent.outcome in ("aborted", "failure") and parent.rewards["Player 1"] in (-1.0, 0.0)
        assert result.children_of(parent.episode_id)[0].experiment == "store"


class _BadLevel(HierarchicalTask):
    levels = {"proposer": Level("arith_proposer", partners={"Proposer": "programmatic"})}

    def spawn(self, parent):
        return [SubEpisodes("judge", {"x": 1})]


def test_bad_tasks_are_named(tiny_workspace, tiny_pair):
    with pytest.raises(RolloutError, match="asked for level 'judge'; levels: proposer"):
        rollout_hierarchy(_BadLevel(), make_learner(tiny_pair), instances=PROPOSER_REFS[:1], records_dir=None)

    class NoLevels(HierarchicalTask):
        pass
    with pytest.raises(RolloutError, match="declares no levels"):
        rollout_hierarchy(NoLevels(), make_learner(tiny_pair), records_dir=None)

    class Twice(HierarchicalTask):
        levels = {"a": Level("arith_solver"), "b": Level("arith_solver")}
    with pytest.raises(RolloutError, match="same game"):
        rollout_hierarchy(Twice(), make_learner(tiny_pair), records_dir=None)


# ----------------------------------------------------------------------------- the store

def test_store_keeps_half_solved_problems_and_resumes(tmp_path):
    store = InstanceStore(capacity=2)
    assert store.add({"problem": "1 + 2"}, 0.5, step=1)
    assert not store.add({"problem": "2 + 2"}, 0.0)  # trivial or impossible: weight 0, not kept
    assert store.add({"problem": "1 + 2"}, 1.0, step=2)  # seen again: the higher weight
    assert store.add({"problem": "3 * 4"}, 0.25, step=2)
    assert store.add({"problem": "5 - 1"}, 0.75, step=3)  # full: the lightest leaves
    assert sorted(i.instance["problem"] for i in store.items.values()) == ["1 + 2", "5 - 1"]
    assert not store.add({"problem": "7 * 7"}, 0.1)  # lighter than all: not kept
    path = store.save(tmp_path / "run" / "instance-store.json")
    assert not list(path.parent.glob("*.tmp*"))
    again = InstanceStore.load(path)
    assert again.as_json() == store.as_json() and again.items[store.key({"problem": "1 + 2"})].seen == 2
    # the same seeded rng draws the same instances from the saved and the resumed store
    assert store.sample(random.Random(3), 20) == again.sample(random.Random(3), 20)
    draws = again.sample(random.Random(0), 4000)
    share = sum(d["problem"] == "1 + 2" for d in draws) / len(draws)
    assert share == pytest.approx(1.0 / 1.75, abs=0.03)  # by weight: 1.0 against 0.75
    assert InstanceStore().sample(random.Random(0)) == []


def test_task_keeps_what_solvers_found_neither_trivial_nor_impossible(tiny_workspace, tiny_pair):
    store = InstanceStore()
    task = _Mixed(num_solvers=2, solver="programmatic", proposer="programmatic", store=store)
    result = rollout_hierarchy(task, make_learner(tiny_pair), instances=PROPOSER_REFS, records_dir=None)
    assert task.keep(result, step=4) == 1
    item, = store.items.values()
    assert item.weight == 1.0 and item.meta["solve_rate"] == 0.5 and item.added_step == 4


class _Mixed(ProposerSolverTask):
    """The task decides what counts as solved: here the second solver of the first proposal
    is counted as lost, so that proposal is solved by half (r = 1/2); the other is trivial."""

    def rewards(self, parent, children):
        if parent.result.game_id == 0:
            import dataclasses
            children = [children[0], dataclasses.replace(children[1], outcome="failure")]
        return super().rewards(parent, children)


def test_a_file_that_is_no_store_is_one_clear_error(tmp_path):
    bad = tmp_path / "store.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(TrainingSetupError, match="is not a playpen instance store"):
        InstanceStore.load(bad)
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(TrainingSetupError, match="not readable JSON"):
        InstanceStore.load(bad)
    with pytest.raises(TrainingSetupError, match="does not exist"):
        InstanceStore.load(tmp_path / "missing.json")


# ----------------------------------------------------------------------------- the example trainer

TRAINER = "hierarchical-grpo"


def test_hierarchical_trainer_runs_logs_levels_and_saves_the_store(tiny_workspace):
    from click.testing import CliRunner
    from playpen.cli import cli
    args = ["run", str(TRAINER), "-l", "tiny-random", "-L", "3", "--max-steps", "1", "--num-generations", "2",
            "--no-evaluate", "--save-steps", "1", "--beta", "0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run_dir = tiny_workspace / "models" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    assert (run_dir / "checkpoint-1" / "adapter_model.safetensors").exists()
    steps = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    step = next(s for s in steps if "train/loss" in s)
    # 2 proposals (level 0) and their 2 x 2 solver episodes (level 1) in one step
    assert step["advantage/0/Proposer/num"] == 2 and step["advantage/1/Solver/num"] == 4
    assert "reward/0/Proposer/mean" in step and "reward/1/Solver/mean" in step
    assert step["offpolicy/stale"] == 0 and step["store/size"] == 0
    store = read(run_dir / "instance-store.json")
    assert store["format"] == "playpen-instance-store" and store["items"] == []
    # the records: proposers and solvers, linked, in one run folder per step
    records = tiny_workspace / "playpen-records" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    metas = [read(p) for p in records.glob("*/*/*/*/instance_*/episode.json")]
    assert sorted(m["hierarchy"]["level"] for m in metas) == [0, 0, 1, 1, 1, 1]
    # a second fresh run refuses to replace the store, before any model loads
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 2 and "instance store of an earlier run" in again.output
    assert len([line for line in again.output.splitlines() if line.strip()]) == 1


def test_hierarchical_trainer_stops_when_it_cannot_learn(tiny_workspace):
    """A random model's proposals and solutions all score alike: with --stop-without-signal 2 the
    run saves and stops after its second step of four and says why in one line."""
    from click.testing import CliRunner
    from playpen.cli import cli
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-random", "-L", "3", "--max-steps", "4",
                                      "--num-generations", "2", "--no-evaluate", "--save-steps", "100", "--beta", "0",
                                      "--stop-without-signal", "2"])
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "stopping at step" in line]
    assert len(said) == 1 and "[playpen] stopping at step 2: 2 steps in a row had no learning signal" in said[0]
    assert "--solver programmatic" in said[0]  # the hint names this trainer's options
    run_dir = tiny_workspace / "models" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-2"]


@pytest.mark.slow
def test_hierarchical_trainer_resumes_its_store_and_draws_from_it(tiny_workspace):
    """--resume: the store comes back; a proposal without a valid problem (a random model's)
    gives its solvers a problem drawn from it."""
    from click.testing import CliRunner
    from playpen.cli import cli
    args = ["run", str(TRAINER), "-l", "tiny-random", "-L", "3", "--max-steps", "1", "--num-generations", "2",
            "--no-evaluate", "--save-steps", "1", "--beta", "0"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    run_dir = tiny_workspace / "models" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    records = tiny_workspace / "playpen-records" / "hierarchical-grpo+lora" / "tiny-random" / "self"
    store = read(run_dir / "instance-store.json")
    store["items"] = [{"instance": {"problem": "2 * (3 + 4)"}, "weight": 1.0, "added_step": 1, "seen": 1,
                       "meta": {}}]
    (run_dir / "instance-store.json").write_text(json.dumps(store), encoding="utf-8")
    resumed = CliRunner().invoke(cli, [*args[:args.index("--max-steps")], "--max-steps", "2",
                                       *args[args.index("--max-steps") + 2:], "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert (run_dir / "checkpoint-2").exists()
    assert read(run_dir / "instance-store.json")["items"][0]["instance"] == {"problem": "2 * (3 + 4)"}
    drawn = [read(p.parent / "instance.json") for p in records.glob("*/*/arith_solver/store/instance_*/episode.json")]
    assert {d["problem"] for d in drawn} >= {"2 * (3 + 4)"}


@pytest.mark.parametrize("args, expected", [
    (["--role-baselines", "Sovler:running"], "option --role-baselines: unknown role 'Sovler'. Did you mean: Solver?"),
    (["--solver", "no-such-model"], "no-such-model"),
    (["--credit", "tree"], "option --credit: 'tree' is not valid"),
    (["--stop-without-signal", "-1"], "option --stop-without-signal: must be >= 0"),
])
def test_hierarchical_trainer_bad_options_are_one_line(tiny_workspace, monkeypatch, args, expected):
    from click.testing import CliRunner
    from playpen import models
    from playpen.cli import cli
    monkeypatch.setattr(models, "load_model_by_name", lambda *a, **k: pytest.fail("a model was loaded"))
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("playpen: error:") and expected in errors[0], result.output
