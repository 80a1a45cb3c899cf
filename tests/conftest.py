"""Shared fixtures: temporary clem workspaces, a runner for the real `clem` CLI."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Under pytest-xdist (`make test` runs `-n auto`): one torch thread per worker, and per process
# that a test starts (the variables are inherited and read when torch loads). Two workers with
# a thread per core each fought over this 2-core machine's cores; set before anything imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_variable] = "1"

from rollout_helpers import PROMPT, TOYGAMES_DIR  # noqa: E402

from playpen.clem import clemcore  # noqa: E402

# Test modules import game masters, and with them clemcore, while pytest collects them:
# import clemcore through playpen's gateway first, so that its logging config writes
# clembench.log into playpen-records/logs and not into the folder pytest runs in.
clemcore()

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES_DIR = REPO_ROOT / "playpen" / "games"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"

# The suite's own folders peak at about 0.2 GB (a passing test's tmp_path is removed when it ends;
# 2026-11-29); vLLM's and torch's caches come beside them.
NEEDS_FREE_MB = 1024


def too_little_disk(folder: str | Path, needs_mb: int = NEEDS_FREE_MB) -> str | None:
    """One line when `folder`'s disk has less than `needs_mb` MB free, else None."""
    free = shutil.disk_usage(folder).free // 2**20
    if free >= needs_mb:
        return None
    return (f"only {free} MB free on the disk of {folder}; the fast suite needs about {needs_mb} MB there "
            f"(its tests' folders, vLLM's and torch's caches): free some space or set TMPDIR")


# The test files that take longest, longest first (a clean clone's `make test`, 2 cores, 2026-11-29).
# `make test` hands whole files to its two workers in collection order (--no-loadscope-reorder), so
# these start first and the many short files fill the end; pytest-xdist's own order (most tests
# first) left the long files of few tests (a vLLM server, the demo) to the end, one worker idle.
LONGEST_FILES = ("test_protocol.py", "test_vllm_trainers.py", "test_vllm_server.py", "test_vllm_engine.py",
                 "test_scale_benchmark.py", "test_pipeline.py", "test_dpo_reference_benchmark.py",
                 "test_grpo_reference_benchmark.py", "test_demo.py", "test_preference.py", "test_self_rewarding.py")


def pytest_collection_modifyitems(session, config, items):
    """The files of :data:`LONGEST_FILES` first, in its order; the others after, as collected."""
    rank = {name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests stay together


def pytest_sessionstart(session):
    """A disk too full for the suite stops it at once, in one line, not in a thousand errors."""
    if not hasattr(session.config, "workerinput"):  # the controller, once
        import tempfile
        problem = too_little_disk(tempfile.gettempdir())
        if problem:
            pytest.exit(problem, returncode=1)


def clem_executable() -> str:
    """The `clem` console script of the interpreter running the tests."""
    candidate = Path(sys.executable).parent / "clem"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("clem")
    if found is None:
        raise RuntimeError("clem console script not found next to the test interpreter")
    return found


@pytest.fixture
def clem_workspace(tmp_path):
    """An empty working directory whose game_registry.json points at playpen's games."""
    (tmp_path / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(GAMES_DIR)}]), encoding="utf-8")
    return tmp_path


def run_clem(args, cwd, timeout=600, input_text=None):
    """Run the real `clem` CLI in `cwd`; returns the CompletedProcess (exit codes are
    not meaningful for clem: check the files it writes)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([clem_executable(), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env, input=input_text)


@pytest.fixture
def clem():
    return run_clem


def run_clem_here(args, cwd):
    """`clem ARGS` through clemcore's own command-line entry point (argument parsing
    included), in this process, where a new interpreter would add only its start-up (10-20 s
    on a loaded 2-core box): the working directory is ``cwd`` while it runs, as for the
    console script; the logging config and torch threads clemcore sets are given back."""
    import clemcore.cli
    from playpen.clem import preserved_logging, preserved_torch_threads
    previous, argv = Path.cwd(), sys.argv
    os.chdir(cwd)
    sys.argv = ["clem", *map(str, args)]
    try:
        with preserved_logging(), preserved_torch_threads():
            clemcore.cli.main()
    finally:
        sys.argv = argv
        os.chdir(previous)


@pytest.fixture
def clem_here():
    return run_clem_here


# ----------------------------------------------------------------------------- tiny models

TINY_MODEL_NAME = "tiny-random"


@pytest.fixture(scope="session")
def smol_tokenizer_dir():
    """The real SmolLM2 tokenizer (from the prepared default model; prepared on first use)."""
    from playpen.default_model import prepare_default_model
    return prepare_default_model()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, smol_tokenizer_dir):
    """A 2-layer, hidden-64 random Llama with the real SmolLM2 tokenizer and chat template,
    saved as a regular HF folder (fast to load and to train on CPU)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-random")
    tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def tiny_registry_entry(model_dir) -> dict:
    return {
        "model_name": TINY_MODEL_NAME,
        "backend": "huggingface_local",
        "huggingface_id": str(model_dir),
        "model_config": {"premade_chat_template": True, "eos_to_cull": "<\\|im_end\\|>",
                         "padding_side": "left"},
    }


@pytest.fixture
def tiny_workspace(tmp_path, tiny_model_dir, monkeypatch):
    """A tmp working directory (cwd) with model_registry.json registering `tiny-random`
    and game_registry.json pointing at playpen's games; models/ and records go here too."""
    (tmp_path / "model_registry.json").write_text(json.dumps([tiny_registry_entry(tiny_model_dir)]),
                                                  encoding="utf-8")
    (tmp_path / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(GAMES_DIR)}]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------- toy games

@pytest.fixture
def toy_workspace(tiny_workspace):
    """tiny_workspace (cwd, tiny-random registered) whose game registry holds the toy games."""
    (tiny_workspace / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(TOYGAMES_DIR)}]), encoding="utf-8")
    return tiny_workspace


@pytest.fixture(scope="session")
def tiny_pair_loaded(tiny_model_dir):
    """(model, tokenizer) of the tiny random Llama, loaded once; tests get copies (tiny_pair)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def tiny_pair(tiny_pair_loaded):
    """(model, tokenizer) of the tiny random Llama, a fresh copy per test: a test that wraps the
    model in LoRA layers or leaves it in train mode cannot change another test's numbers (the
    suite's order once did: a forced-choice check 0.34 nats off after such a test)."""
    import copy
    model, tokenizer = tiny_pair_loaded
    return copy.deepcopy(model), copy.deepcopy(tokenizer)


@pytest.fixture
def foreign_adapter():
    """Makes an adapter folder trained on another base model (its weights are never read:
    the trainers check the base model first)."""
    def make(path: Path) -> Path:
        path.mkdir()
        (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "SomeOrg/other-model-7b",
                                                              "peft_type": "LORA"}))
        (path / "adapter_model.safetensors").write_bytes(b"")
        return path
    return make


@pytest.fixture(scope="session")
def yesno_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model taught (plain torch, a few steps) to answer PROMPT with "yes" or
    "no" about equally often: half of its sayword episodes are won, a reward GRPO can raise."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                           tokenize=False)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([tokenizer(prompt + w + "<|im_end|>", add_special_tokens=False)["input_ids"]
                        for w in ("yes", "no")])
    labels = ids.clone()
    labels[:, :start] = -100
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2)
    model.train()
    for _ in range(25):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    out = tmp_path_factory.mktemp("tiny-yesno")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def benchmark_script():
    """``benchmark_script("engines")``: a benchmarks/ script as a module (the scripts import
    harness.py from their folder, so that folder is on sys.path while the module's tests run)."""
    import importlib
    import sys
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(folder)
