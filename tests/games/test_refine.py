"""refine: reply parsers, the checker, the programmatic critic and generator (the
generator follows critiques only), scripted episodes through the scorer, instance sets,
and clem run/score/eval end to end."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import gametest
from gametest import all_instances, outcome

GAME_DIR = gametest.BUILTIN_GAMES / "refine"
rules = gametest.load_module(GAME_DIR, "refine_rules")
policy = gametest.load_module(GAME_DIR, "refine_policy")
master = gametest.load_module(GAME_DIR, "refine_master", "master")
generator = gametest.load_module(GAME_DIR, "refine_instancegenerator", "instancegenerator")

from clemcore.clemgame.errors import ParseError  # noqa: E402

EVAL = gametest.load_instances(GAME_DIR, "instances")
TRAIN = gametest.load_instances(GAME_DIR, "instances_train")
CONSTRAINTS = {"min_words": 8, "max_words": 12, "include": ["golden", "quiet"], "exclude": ["water"],
               "start": "Today", "end": "?"}
EXPERIMENT = {"name": "hand_made", "revisions": 1}
INSTANCE = {"game_id": 0, "topic": "the ocean", "association": "water", "constraints": CONSTRAINTS}
GOOD = "Today the quiet golden ocean hums a song for us?"


def benchmark():
    return gametest.benchmark(master.RefineBenchmark, GAME_DIR)


def play(responses=None, experiment=EXPERIMENT, instance=INSTANCE):
    _, interactions, scores, steps = gametest.play_episode(benchmark(), experiment, instance, responses)
    return interactions, scores, steps


# --- parsers and the checker --------------------------------------------------------------

def test_parsers_accept():
    assert rules.parse_draft("draft: line one\nline two ") == "line one\nline two"
    assert rules.parse_draft("DRAFT:\nthe text") == "the text"
    assert rules.parse_critique(" Critique : fine") == "fine"


@pytest.mark.parametrize("text", ["", "the text", "DRAFT:", "DRAFT:  \n  ", "DRAFT: DRAFT: x", "Draft - x",
                                  "Here it is. DRAFT: x", "ＤＲＡＦＴ: x", "CRITIQUE: x", None])
def test_parse_draft_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_draft(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_parse_errors(text):
    for parse in (rules.parse_draft, rules.parse_critique):
        try:
            assert parse(text).strip()
        except ParseError:
            pass


@pytest.mark.parametrize("draft, failing", [
    (GOOD, []),
    ("today the quiet golden ocean hums a song for us?", []),
    ('Today the quiet golden ocean hums a song for us?"', []),
    ("Today the quiet golden ocean hums a song for us.", ["end"]),
    ("The quiet golden ocean hums a song for us today?", ["start"]),
    ("Today the quiet golden ocean hums a song of waters?", ["exclude:water"]),
    ("Today the quiet golden ocean hums with Water?", ["exclude:water"]),
    ("Today the quiet goldenrod ocean hums a song for us?", ["include:golden"]),
    ("Today quiet golden?", ["length"]),
    ("Today " + "very " * 12 + "quiet golden?", ["length"]),
    ("", ["length", "include:golden", "include:quiet", "start", "end"]),
])
def test_check_draft(draft, failing):
    results = rules.check_draft(draft, CONSTRAINTS)
    assert sorted(k for k, ok in results.items() if not ok) == sorted(failing)
    assert rules.score_draft(draft, CONSTRAINTS) == pytest.approx(100 * (6 - len(failing)) / 6)


# --- programmatic players -----------------------------------------------------------------

def test_critic_names_exactly_the_unmet_requirements():
    critique = rules.parse_critique(policy.critic_reply("The ocean is full of water.", CONSTRAINTS))
    assert "'golden'" in critique and "'quiet'" in critique and "Remove the word 'water'" in critique
    assert "Start with the word 'Today'" in critique and "End with '?'" in critique
    assert "Use between 8 and 12 words (the draft has 6)" in critique
    assert "Use between" not in policy.critic_reply("The ocean is full of water and many fish.", CONSTRAINTS)
    assert rules.parse_critique(policy.critic_reply(GOOD, CONSTRAINTS)).startswith("The draft meets every")


@pytest.mark.parametrize("critique", [
    policy.critic_reply("The ocean is full of water.", CONSTRAINTS).partition(":")[2],
    "Please add the word “golden” and also include 'quiet'. Avoid \"water\" entirely.\n"
    "Begin with 'Today' and finish with a question mark. Use at least 8 words and at most 12 words.",
])
def test_generator_follows_critiques(critique):
    reply = policy.generator_reply("the ocean", "water", [critique], previous="The ocean is full of water.")
    draft = rules.parse_draft(reply)
    results = rules.check_draft(draft, CONSTRAINTS)
    assert all(ok for name, ok in results.items() if name != "length"), draft
    assert "water" not in draft.lower()


def test_generator_ignores_requirements_nobody_named():
    assert rules.parse_draft(policy.generator_reply("the ocean", "water", [])) == "The ocean is full of water."
    praise = rules.parse_draft(policy.generator_reply("the ocean", "water", ["Lovely, keep it!"],
                                                      previous="The ocean is full of water."))
    assert rules.score_draft(praise, CONSTRAINTS) == rules.score_draft("The ocean is full of water.", CONSTRAINTS)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=3), st.text(max_size=100))
def test_policies_always_reply_in_format(critiques, draft):
    assert rules.parse_draft(policy.generator_reply("the ocean", "water", critiques, previous=draft))
    assert rules.parse_critique(policy.critic_reply(draft, CONSTRAINTS))


# --- scripted episodes --------------------------------------------------------------------

def test_scripted_success_and_improvement():
    interactions, scores, steps = play(["DRAFT: The ocean is full of water.", "CRITIQUE: fix it", f"DRAFT: {GOOD}"])
    assert outcome(scores) == "Success" and steps == 3 and interactions["Drafts"][-1] == GOOD
    assert scores["Main Score"] == 100 and scores["Constraints Met"] == 6
    assert scores["First Draft Score"] == 0 and scores["Improvement"] == 100  # the first draft met nothing


def test_scripted_lose_scores_the_final_draft():
    _, scores, _ = play([f"DRAFT: {GOOD}", "CRITIQUE: shorter", "DRAFT: Today quiet golden?"])
    assert outcome(scores) == "Lose" and scores["Main Score"] == pytest.approx(500 / 6)
    assert scores["Improvement"] == pytest.approx(-100 / 6)


@pytest.mark.parametrize("replies, role", [(["The ocean."], "Generator"), (["DRAFT: x", "Looks fine"], "Critic"),
                                           (["DRAFT: x", "CRITIQUE: y", "DRAFT:"], "Generator")])
def test_aborted(replies, role):
    _, scores, steps = play(replies)
    assert outcome(scores) == "Aborted" and math.isnan(scores["Main Score"]) and steps == len(replies)
    assert scores[f"Aborted by {role}"] == 1


def test_a_praising_critic_leaves_the_first_draft():
    gm, _ = gametest.start_episode(benchmark(), EXPERIMENT, INSTANCE)
    done = False
    while not done:
        player = gm.current_player
        reply = "CRITIQUE: Wonderful, keep it!" if player.game_role == "Critic" else player(gm.get_context_for(player))
        done, _ = gm.step(reply)
    assert gm.state.outcome.value == "failure" and gm.drafts[-1] == gm.drafts[0]


@pytest.mark.parametrize("instances", [EVAL, TRAIN], ids=["eval", "train"])
def test_programmatic_pair_meets_every_requirement(instances):
    for experiment, instance in all_instances(instances):
        interactions, scores, steps = play(experiment=experiment, instance=instance)
        assert outcome(scores) == "Success" and scores["Main Score"] == 100
        assert steps == 1 + 2 * experiment["revisions"] and scores["First Draft Score"] < 50


# --- instances ----------------------------------------------------------------------------

def test_instances_disjoint_and_well_formed():
    eval_rows, train_rows = list(all_instances(EVAL)), list(all_instances(TRAIN))
    assert len(eval_rows) == 24 and len(train_rows) == 96
    for _, instance in eval_rows + train_rows:
        c = instance["constraints"]
        assert c["exclude"] == [instance["association"]] and not set(c["include"]) & set(c["exclude"])
        assert c["min_words"] < c["max_words"] and c["end"] in ".!?"
    assert not {i["topic"] for _, i in eval_rows} & {i["topic"] for _, i in train_rows}


def test_generator_is_reproducible(tmp_path):
    for split, stem in gametest.SPLITS:
        written = gametest.generated_instances(generator.RefineInstanceGenerator(split), tmp_path, stem,
                                               seed=generator.SEED)
        assert written == gametest.load_instances(GAME_DIR, stem)


# --- end to end with the real clem CLI ----------------------------------------------------

def test_clem_run_score_eval_programmatic(clem_workspace, clem_here):
    results = gametest.clem_run_score_eval(clem_here, clem_workspace, "refine")
    episodes = gametest.episode_scores(results, "refine")
    assert len(episodes) == 24 and all(e["Main Score"] == 100 and e["Improvement"] > 50 for e in episodes)
    row = gametest.results_row(results)
    assert float(row["refine, % Played"]) == 100.0 and float(row["refine, Quality Score"]) == 100.0
