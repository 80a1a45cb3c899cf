"""Credit assignment in the GRPO trainers: exact advantages on hand-made groups for every
assigner (flat and hierarchical groups; group, running, episodic, constant and chance
baselines; per-role baselines), the per-level/role metrics, and bad options (one line,
exit 2, before any model loads)."""
import math

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.training.grpo import advantages as adv

SP_TRAINER = "grpo"
NAN = math.nan
EPS = 1e-4


def sd(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def quiet(baseline="group", **kwargs):
    return adv.Advantages(baseline, kwargs.pop("group_size", 2), echo=lambda line: None, **kwargs)


# a hierarchy's batch: two proposer rows (level 0, one group), then the solvers of each
# proposal (level 1, groups of 3 and 2 rows: sizes differ), rows interleaved on purpose
REWARDS = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, NAN]
ROLES = ["Proposer", "Proposer", "Solver", "Solver", "Solver", "Solver", "Solver", "Proposer", "Solver"]
GAMES = ["proposer"] * 2 + ["solver"] * 5 + ["proposer", "solver"]
LEVELS = [0, 0, 1, 1, 1, 1, 1, 0, 1]
GROUPS = ["p0", "p0", "s0", "s0", "s1", "s0", "s1", "p0", "s1"]


def test_hierarchical_groups_by_level_type_role_and_group():
    a = quiet(credit="hierarchical")
    out = a.compute(REWARDS, ROLES, GAMES, levels=LEVELS, group_ids=GROUPS)
    proposer = [1.0, 0.0, 0.5]  # rows 0, 1, 7
    s0 = [1.0, 0.0, 1.0]  # rows 2, 3, 5
    s1 = [1.0, 0.0]  # rows 4, 6 (row 8 unscored)
    expected = [0.0] * 9
    for rows, values in (([0, 1, 7], proposer), ([2, 3, 5], s0), ([4, 6], s1)):
        mean, std = sum(values) / len(values), sd(values)
        for i, v in zip(rows, values):
            expected[i] = (v - mean) / (std + EPS)
    assert out == pytest.approx(expected, abs=1e-12)
    assert out[8] == 0.0
    assert a.metrics == {"grpo/dropped_groups": 0.0}
    assert a.advantage_metrics["advantage/0/Proposer/num"] == 3
    assert a.advantage_metrics["advantage/1/Solver/num"] == 5
    assert a.advantage_metrics["advantage/1/Solver/mean"] == pytest.approx(
        sum(expected[i] for i in (2, 3, 4, 5, 6)) / 5, abs=1e-12)


def test_hierarchical_never_mixes_levels_or_roles_that_share_a_group_id():
    # one group id for everything: hierarchical credit still splits by (level, type, role)
    a = quiet(credit="hierarchical")
    out = a.compute([1.0, 0.0, 1.0, 1.0], ["P", "P", "S", "S"], ["g", "g", "h", "h"], levels=[0, 0, 1, 1],
                    group_ids=["x"] * 4)
    std = sd([1.0, 0.0])
    assert out == pytest.approx([0.5 / (std + EPS), -0.5 / (std + EPS), 0.0, 0.0], abs=1e-12)
    assert out[2:] == [0.0, 0.0]  # the solvers' group is all equal: dropped
    assert a.metrics["grpo/dropped_groups"] == 0.5


def test_flat_credit_takes_consecutive_rows_whatever_the_group_ids():
    a = quiet(group_size=2)
    out = a.compute([1.0, 0.0, 1.0, 0.0], ["A", "B", "A", "B"], ["g"] * 4, group_ids=["x", "y", "x", "y"])
    std = sd([1.0, 0.0])
    assert out == pytest.approx([0.5 / (std + EPS), -0.5 / (std + EPS)] * 2, abs=1e-12)


def test_running_baseline_decays_as_configured_and_is_kept_per_level():
    a = quiet("running", credit="hierarchical", momentum=0.5)
    rewards, roles, games, levels = [1.0, 0.0, 1.0, 1.0, 0.0], ["P", "P", "S", "S", "S"], ["g", "g", "h", "h", "h"], \
        [0, 0, 1, 1, 1]
    groups = ["a", "a", "b", "b", "b"]
    out = a.compute(rewards, roles, games, levels=levels, group_ids=groups)
    # first step: the step's mean per (type, role, level)
    sp, ss = sd([1, 0]), sd([1, 1, 0])
    assert out == pytest.approx([0.5 / (sp + EPS), -0.5 / (sp + EPS),
                                 (1 - 2 / 3) / (ss + EPS), (1 - 2 / 3) / (ss + EPS), (0 - 2 / 3) / (ss + EPS)],
                                abs=1e-12)
    assert a.running == {("g", "P"): 0.5, ("h", "S", 1): pytest.approx(2 / 3)}
    out = a.compute([1.0, 1.0, 0.0, 0.0, 1.0], roles, games, levels=levels, group_ids=groups)
    # proposer group all equal: dropped; solvers against last step's 2/3
    ss = sd([0, 0, 1])
    assert out == pytest.approx([0.0, 0.0, -2 / 3 / (ss + EPS), -2 / 3 / (ss + EPS), 1 / 3 / (ss + EPS)], abs=1e-12)
    assert a.running[("g", "P")] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert a.running[("h", "S", 1)] == pytest.approx(0.5 * 2 / 3 + 0.5 * 1 / 3)
    assert a.metrics["grpo/baseline/P"] == pytest.approx(0.75)
    assert a.metrics["grpo/baseline/1/S"] == pytest.approx(0.5)


def test_episodic_baseline_moves_after_every_episode():
    a = quiet("episodic", group_size=4, momentum=0.5)
    out = a.compute([1.0, 0.0, 0.0, 1.0], ["A"] * 4, ["g"] * 4)
    # the first row's baseline: the step's mean 0.5; then b <- 0.5 b + 0.5 r
    bases, b = [], 0.5
    for r in (1.0, 0.0, 0.0, 1.0):
        bases.append(b)
        b = 0.5 * b + 0.5 * r
    std = sd([1, 0, 0, 1])
    assert bases == [0.5, 0.75, 0.375, 0.1875]
    assert out == pytest.approx([(r - base) / (std + EPS) for r, base in zip((1, 0, 0, 1), bases)], abs=1e-12)
    assert a.episodic == {("g", "A"): pytest.approx(b)}
    assert a.metrics["grpo/baseline/A"] == pytest.approx(b)
    # the next step starts where this one ended
    out = a.compute([0.0, 1.0, 1.0, 1.0], ["A"] * 4, ["g"] * 4)
    assert out[0] == pytest.approx((0.0 - b) / (sd([0, 1, 1, 1]) + EPS), abs=1e-12)


def test_constant_baseline_and_per_role_baselines():
    a = quiet("group", group_size=2, constant=0.25, role_baselines={"B": "constant"})
    out = a.compute([1.0, 0.0, 1.0, 0.0], ["A", "A", "B", "B"], ["g"] * 4)
    std = sd([1, 0])
    assert out == pytest.approx([0.5 / (std + EPS), -0.5 / (std + EPS), 0.75 / (std + EPS), -0.25 / (std + EPS)],
                                abs=1e-12)
    assert a.metrics == {"grpo/dropped_groups": 0.0, "grpo/baseline/B": 0.25}
    assert a.advantage_metrics["advantage/0/B/mean"] == pytest.approx(0.25 / (std + EPS))


def test_chance_baseline_per_level():
    a = quiet("chance", credit="hierarchical", chance={("h", "S"): 0.5})
    out = a.compute([1.0, 0.0, 1.0], ["S"] * 3, ["h"] * 3, levels=[1] * 3, group_ids=["s"] * 3)
    std = sd([1, 0, 1])
    assert out == pytest.approx([0.5 / (std + EPS), -0.5 / (std + EPS), 0.5 / (std + EPS)], abs=1e-12)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="credit must be one of flat, hierarchical"):
        adv.Advantages(credit="tree")
    with pytest.raises(ValueError, match="baseline must be one of"):
        adv.Advantages(role_baselines={"A": "median"})
    with pytest.raises(ValueError, match="decay"):
        adv.Advantages(momentum=1.0)
    with pytest.raises(ValueError, match="not whole groups"):
        quiet(group_size=2).compute([1.0], ["A"], ["g"])


@pytest.mark.parametrize("args, expected", [
    (["--credit", "tree"], "option --credit: 'tree' is not valid; expected flat (TRL's groups) or hierarchical"),
    (["--baseline-decay", "1.5"], "option --baseline-decay: 1.5 is not valid; expected a number in [0, 1)"),
    (["--max-policy-lag", "-1"], "option --max-policy-lag: -1 is not valid"),
    (["--off-policy", "keep"], "option --off-policy: 'keep' is not valid; expected drop or clip"),
    (["--role-baselines", "Instruction Giver:median"], "option --role-baselines: 'median' (for Instruction Giver)"),
    (["--role-baselines", "Giver"], "option --role-baselines: 'Giver' is not ROLE:BASELINE"),
    (["--role-baselines", "Instruction Givr:running"],
     "option --role-baselines: unknown role 'Instruction Givr'. Did you mean: Instruction Giver"),
])
def test_bad_credit_options_are_one_line_before_any_model_loads(tiny_workspace, monkeypatch, args, expected):
    from playpen import models
    monkeypatch.setattr(models, "load_model_by_name", lambda *a, **k: pytest.fail("a model was loaded"))
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("playpen: error:") and expected in errors[0], result.output
    assert not (tiny_workspace / "models").exists() and not (tiny_workspace / "playpen-records").exists()
