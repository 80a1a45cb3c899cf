"""With the real embedded model (smol-135m) and the real `clem` CLI: run with -m slow."""
import json

import pytest
import torch


from playpen.rollouts import Branching, InstanceRef, Learner, SamplingConfig, rollout

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol(smol_tokenizer_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return AutoModelForCausalLM.from_pretrained(smol_tokenizer_dir), AutoTokenizer.from_pretrained(smol_tokenizer_dir)


def test_smol_on_taboo_is_token_exact_and_clem_scores_it(tiny_workspace, smol, clem):
    model, tokenizer = smol
    learner = Learner(model, tokenizer, "smol-135m", SamplingConfig(temperature=0.7, max_new_tokens=24))
    result = rollout("taboo", learner, partners={"Guesser": "programmatic"}, branching=Branching(factor=2),
                     instances=lambda row: row["game_instance"]["game_id"] < 2, run_name="smol", seed=0)
    assert result.episodes and all(e.error is None for e in result.episodes)
    trajectory = max(result.trajectories, key=lambda t: t.num_turns)
    ids = torch.tensor([list(trajectory.prompt_ids + trajectory.completion_ids)])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0].float() / 0.7, -1)
    offset = len(trajectory.prompt_ids)
    for i, (flag, lp) in enumerate(zip(trajectory.env_mask, trajectory.logprobs)):
        if flag:
            assert lp == pytest.approx(logprobs[offset + i - 1, trajectory.completion_ids[i]].item(), abs=2e-3)
    run = str(result.run_dir)
    clem(["score", "-g", "taboo", "-r", run], cwd=tiny_workspace)
    clem(["eval", "-r", run], cwd=tiny_workspace)
    clem(["transcribe", "-g", "taboo", "-r", run], cwd=tiny_workspace)
    episodes = sorted(p.parent for p in result.run_dir.rglob("interactions.json"))
    assert len(episodes) == len(result.episodes)
    for folder in episodes:
        assert (folder / "scores.json").exists() and (folder / "transcript.html").exists()
    assert "smol-135m--programmatic" in (result.run_dir / "results.csv").read_text()


def test_clem_cli_scores_branch_episodes_of_toy_games(toy_workspace, clem, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    learner = Learner(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                      AutoTokenizer.from_pretrained(tiny_model_dir), "tiny-random",
                      SamplingConfig(temperature=1.0, max_new_tokens=4))
    result = rollout(["countdown", "relay"], learner, partners={"Listener": "programmatic"},
                     branching=Branching(factor=3), run_name="cli",
                     instances=[InstanceRef("countdown", "one_to_five", 0), InstanceRef("relay", "lenient", 1)])
    run = str(result.run_dir)
    for game in ("countdown", "relay"):
        clem(["score", "-g", game, "-r", run], cwd=toy_workspace)
    clem(["eval", "-r", run], cwd=toy_workspace)
    scored = sorted(p.parent for p in result.run_dir.rglob("scores.json"))
    assert len(scored) == 6 and all(p.name.endswith(("_b0", "_b1", "_b2")) for p in scored)
    raw = (result.run_dir / "raw.csv").read_text()
    assert raw.count("\n") > 6
    for folder in scored:
        scores = json.loads((folder / "scores.json").read_text())
        assert scores["episode scores"]["Aborted"] in (0, 1, True, False)
