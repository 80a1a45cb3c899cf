"""Judges: a model scores a learner's candidate turn through a prompt template and a regex.

A judge prompt is a Jinja template (sandboxed, strict: a variable it uses but the trainer
does not give is an error when the options are checked) rendered with

- ``game``, ``role``: the game and the role of the player whose turn is judged;
- ``turn``: which of that player's turns it is (0 = its first move);
- ``conversation``: the messages the player saw before the turn (``role``, ``content``);
- ``candidate``: the turn to judge (text);
- ``score_min``, ``score_max``: the range of a valid score.

The rendered prompt is sent as one user message; the judge answers greedily. The score is
the last match of a regex in the reply — its group ``score``, else its first group, else
the whole match — read as a number; no match, no number or a number out of range is no
score (:func:`parse_score` returns None). playpen ships two prompts (``judge_prompts/``:
``additive``, a 5-point checklist whose points add up, and ``game-aware``, the same
checklist with what winning means in each of playpen's games) and the regex that reads
the score they ask for (``Score: N``; also ``total of N``, ``score = N``, as small judges
put it); ``--judge-template FILE`` and ``--score-regex FILE`` replace them.

Who judges (``--judge``): ``learner`` — the policy itself, as it is when a round collects
(self-rewarding proper) — or any registered model, loaded by name: a local HF model
generates in batches, any other (a remote API model, with playpen's timeouts and retries)
is called concurrently. The learner judges with the learner's engine (``--engine``: vLLM
too, in the dtype of the run's sampled turns, so one vLLM engine answers both); a registered
local judge with playpen's (one vLLM engine per process serves one model folder). Judge prompts and replies never enter training data: a
:class:`Verdict` carries a score and the reply only for logging.
"""
from __future__ import annotations

import concurrent.futures
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.errors import JudgeError, PlaypenError
from playpen.inference import engine, vllm_engine
from playpen.inference.mixed_lora import BASE
from playpen.inference.types import SamplingConfig
from playpen.models import check_model_name, load_model_by_name
from playpen.remote import check_reachable
from playpen.rollouts import chat
from playpen.rollouts.chat import template_kwargs_of
from playpen.training.common.config import option
from playpen.training.common.lifecycle import tokenizer_of

PROMPTS_DIR = Path(__file__).resolve().parent / "judge_prompts"
TEMPLATES = {"additive": "additive.jinja", "game-aware": "game-aware.jinja"}
SCORE_REGEX_FILE = PROMPTS_DIR / "score.regex"
LEARNER_JUDGE = "learner"
VARIABLES = ("game", "role", "turn", "conversation", "candidate", "score_min", "score_max")
# what a template is rendered with when the options are checked (a variable it lacks is named then)
_SAMPLE = dict(game="referencegame", role="Instruction Giver", turn=0, candidate="Expression: the grid with an X",
               conversation=({"role": "user", "content": "Describe the target grid."},), score_min=0, score_max=5)


@dataclass
class JudgeOptions:
    """Who judges candidate turns, with which prompt, and how a score is read from a reply."""

    judge: str = option(LEARNER_JUDGE, "who scores the candidates: learner (the policy itself as each round "
                                       "starts) or a registered model name (local or a remote API model)")
    judge_template: str = option("additive", "the judge's prompt: a Jinja template file, or a shipped one: "
                                             "additive (5-point checklist), game-aware (the checklist with "
                                             "what winning means in each game)")
    score_regex: str = option("", "a file holding the regex that reads the score from a judge reply (last "
                                  "match; group 'score', else group 1); empty = playpen's ('Score: N', 'total of N')")
    score_min: float = option(0.0, "lowest valid score (a score out of range counts as no score)")
    score_max: float = option(5.0, "highest valid score")
    judge_max_tokens: int = option(128, "tokens per judge reply")
    judge_batch_size: int = option(8, "judge prompts per generate call (local judge) or calls in flight (remote)")
    judge_adapter: bool = option(True, "--judge learner: judge with the adapter being trained (--no-judge-adapter: "
                                       "the base model judges, e.g. when an SFT adapter only speaks the games)")

    def validate(self) -> None:
        super().validate()
        if not self.score_min < self.score_max:
            raise JudgeError(f"--score-min {self.score_min:g} must be below --score-max {self.score_max:g}")
        if not self.judge:
            raise JudgeError("option --judge: empty; expected 'learner' or a registered model name")
        self.judge_spec()  # the template and the regex load and fit

    def judge_spec(self) -> "JudgeSpec":
        return JudgeSpec(load_template(self.judge_template), load_regex(self.score_regex),
                         float(self.score_min), float(self.score_max),
                         self.judge_template, self.score_regex or str(SCORE_REGEX_FILE))


# ----------------------------------------------------------------------------- template, regex

def template_path(value: str) -> Path:
    """The file of ``--judge-template``: a shipped prompt's name or a path."""
    return PROMPTS_DIR / TEMPLATES[value] if value in TEMPLATES else Path(value)


def load_template(value: str):
    """The Jinja template of ``--judge-template`` (sandboxed, StrictUndefined), rendered once
    with sample values; JudgeError (one line) when missing, malformed or using an unknown
    variable, or when it never shows the candidate."""
    import jinja2
    from jinja2 import meta
    from jinja2.sandbox import SandboxedEnvironment
    path = template_path(value)
    if not path.is_file():
        raise JudgeError(f"option --judge-template: {value!r} is neither a shipped prompt "
                         f"({', '.join(TEMPLATES)}) nor a template file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise JudgeError(f"cannot read judge template {path}: {e}") from e
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    try:
        used = meta.find_undeclared_variables(env.parse(text))
        template = env.from_string(text)
        if "candidate" not in used:
            raise JudgeError(f"judge template {path} never shows the turn to judge: it must use "
                             f"{{{{ candidate }}}}")
        template.render(**_SAMPLE)
    except jinja2.TemplateSyntaxError as e:
        raise JudgeError(f"judge template {path}:{e.lineno}: {e.message}") from e
    except jinja2.UndefinedError as e:
        raise JudgeError(f"judge template {path}: {e.message} (a template may use: "
                         f"{', '.join(VARIABLES)})") from e
    except jinja2.TemplateError as e:
        raise JudgeError(f"judge template {path}: {type(e).__name__}: {e}") from e
    return template


def load_regex(value: str) -> re.Pattern:
    """The compiled regex of ``--score-regex FILE`` (empty: playpen's); JudgeError when the
    file is missing or empty or the regex does not compile."""
    path = Path(value) if value else SCORE_REGEX_FILE
    if not path.is_file():
        raise JudgeError(f"option --score-regex: {value!r} is not a file (expected a file holding one "
                         f"regular expression, e.g. a copy of {SCORE_REGEX_FILE})")
    try:
        text = path.read_text(encoding="utf-8").strip("\r\n")
    except (OSError, UnicodeDecodeError) as e:
        raise JudgeError(f"cannot read score regex {path}: {e}") from e
    if not text.strip():
        raise JudgeError(f"score regex file {path} is empty")
    try:
        return re.compile(text)
    except re.error as e:
        raise JudgeError(f"score regex in {path} does not compile: {e}") from e


def parse_score(reply: str, pattern: re.Pattern, low: float, high: float) -> Optional[float]:
    """The score in a judge's reply: the last match of `pattern` — its group ``score``, else
    its first group, else the whole match — as a number in ``[low, high]``; else None."""
    last = None
    for last in pattern.finditer(reply or ""):
        pass
    if last is None:
        return None
    group = "score" if "score" in pattern.groupindex else (1 if pattern.groups else 0)
    text = last.group(group)
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and low <= value <= high else None


@dataclass(frozen=True)
class JudgeSpec:
    """A loaded template and regex with the score range."""

    template: Any
    pattern: re.Pattern
    low: float
    high: float
    template_source: str = ""
    regex_source: str = ""

    def prompt(self, request: "JudgeRequest") -> str:
        import jinja2
        try:
            return self.template.render(
                game=request.game, role=request.role, turn=request.turn, candidate=request.candidate,
                conversation=[dict(m) for m in request.conversation],
                score_min=_number(self.low), score_max=_number(self.high))
        except jinja2.TemplateError as e:
            raise JudgeError(f"judge template {self.template_source}: {type(e).__name__}: {e}") from e

    def score(self, reply: str) -> Optional[float]:
        return parse_score(reply, self.pattern, self.low, self.high)


def _number(value: float):
    return int(value) if float(value).is_integer() else value


# ----------------------------------------------------------------------------- judges

@dataclass(frozen=True)
class JudgeRequest:
    """A candidate turn in its context: what the judge is asked about."""

    conversation: tuple[dict, ...]
    candidate: str
    game: str
    role: str
    turn: int = 0


@dataclass(frozen=True)
class Verdict:
    """A judge's reply and the score read from it (None: the reply gave none)."""

    reply: str
    score: Optional[float]


class Judge:
    """Scores candidate turns: renders each request with the spec's template, asks the judge
    model, reads the score with the spec's regex.

    `model` None: the learner judges — pass its policy (as the round starts) to
    :meth:`verdicts`, with the learner's `tokenizer` (`with_adapter` False: a PEFT policy's
    rows answered by its base, ``"__base__"``) and the learner's sampling `engine` (whose
    ``engine``, ``vllm_url`` and ``engine_dtype`` it generates with). A local HF judge is a clemcore model
    with ``.model`` and ``.tokenizer``; any other clemcore ``Model`` (remote API models
    included) is called through ``generate_response``, `batch_size` calls in flight.
    """

    def __init__(self, spec: JudgeSpec, name: str, model: Any = None, tokenizer: Any = None,
                 template_kwargs: Optional[dict] = None, max_tokens: int = 128, batch_size: int = 8,
                 with_adapter: bool = True, engine: Optional[SamplingConfig] = None):
        self.spec, self.name, self.model, self.with_adapter = spec, name, model, with_adapter
        self.engine = engine
        self.tokenizer, self.template_kwargs = tokenizer, dict(template_kwargs or {})
        self.max_tokens, self.batch_size = max_tokens, batch_size
        if model is not None and hasattr(model, "model") and hasattr(model, "tokenizer"):
            self.tokenizer, self.template_kwargs = model.tokenizer, template_kwargs_of(model)

    def verdicts(self, requests: Sequence[JudgeRequest], policy: Any = None) -> list[Verdict]:
        prompts = [self.spec.prompt(r) for r in requests]
        if not prompts:
            return []
        if self.model is None:
            if policy is None:
                raise ValueError("the learner judges: pass its policy")
            base_rows = not self.with_adapter and hasattr(policy, "peft_config")  # the base under the adapter judges
            replies = self._local(policy, prompts, self._sampling(policy), BASE if base_rows else None)
        elif hasattr(self.model, "model") and hasattr(self.model, "tokenizer"):
            replies = self._local(self.model.model, prompts, self._sampling(None))
        else:
            replies = self._remote(prompts)
        return [Verdict(reply, self.spec.score(reply)) for reply in replies]

    def _sampling(self, policy: Any) -> SamplingConfig:
        """Greedy replies of ``judge_max_tokens``; the learner's engine when `policy` (the
        learner) judges. vLLM's ``auto`` dtype is pinned to that of the run's sampled turns:
        greedy ones would take the model's own and restart the engine at every switch."""
        sampling = SamplingConfig(temperature=0.0, max_new_tokens=self.max_tokens, max_batch_size=self.batch_size)
        if policy is None or self.engine is None:
            return sampling
        chosen = self.engine
        dtype = chosen.engine_dtype
        if chosen.engine == "vllm" and dtype == "auto":
            own = str(getattr(policy, "dtype", "float32")).replace("torch.", "")
            dtype = vllm_engine.engine_dtype(replace(chosen, temperature=chosen.temperature or 1.0), own)
        return replace(sampling, engine=chosen.engine, vllm_url=chosen.vllm_url, engine_dtype=dtype)

    def _local(self, model: Any, prompts: list[str], sampling: SamplingConfig,
               adapter: Optional[str] = None) -> list[str]:
        import torch

        ids = [chat.prompt_ids(self.tokenizer, [{"role": "user", "content": p}], self.template_kwargs)
               for p in prompts]
        training = model.training
        model.eval()
        try:
            with torch.no_grad():
                generations, _ = engine.generate_within(model, self.tokenizer, ids, sampling,
                                                        adapter_names=None if adapter is None else [adapter] * len(ids))
        finally:
            model.train(training)
        return [g.text if g is not None else "" for g in generations]  # a prompt too long: no reply

    def _remote(self, prompts: list[str]) -> list[str]:

        def call(prompt: str) -> str:
            try:
                return str(self.model.generate_response([{"role": "user", "content": prompt}])[2] or "")
            except PlaypenError:
                raise  # one line naming the model and its server (playpen.remote)
            except Exception as e:  # noqa: BLE001 - said in one line with the judge's name
                raise JudgeError(f"judge '{self.name}' failed: {type(e).__name__}: {e}") from e

        if self.batch_size == 1 or len(prompts) == 1:
            return [call(p) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(self.batch_size, thread_name_prefix="judge") as pool:
            return list(pool.map(call, prompts))


NOT_A_JUDGE = ("programmatic", "mock", "human")


def check_judge(options: JudgeOptions) -> None:
    """``--judge``: ``learner`` or a registered model that can be loaded (the registry entry,
    its backend, files and key checked without loading anything); UnknownModelError with
    close matches for a typo."""
    if options.judge == LEARNER_JUDGE:
        return
    if options.judge in NOT_A_JUDGE:
        raise JudgeError(f"option --judge: '{options.judge}' cannot judge (it plays games by rule); expected "
                         f"'{LEARNER_JUDGE}' or a registered model name")
    check_model_name(options.judge, "judge")


def load_judge(options: JudgeOptions, learner: Any) -> Judge:
    """The judge of the options; a remote judge's server must answer first."""
    spec = options.judge_spec()
    kwargs = dict(max_tokens=options.judge_max_tokens, batch_size=options.judge_batch_size)
    if options.judge == LEARNER_JUDGE:
        return Judge(spec, f"{learner.name} (learner{'' if options.judge_adapter else ', no adapter'})",
                     tokenizer=tokenizer_of(learner), template_kwargs=template_kwargs_of(learner),
                     with_adapter=options.judge_adapter,
                     engine=SamplingConfig.from_gen_args(getattr(learner, "gen_args", None)), **kwargs)
    model = load_model_by_name(options.judge, gen_args=dict(temperature=0.0, max_tokens=options.judge_max_tokens),
                               role="judge")
    check_reachable(model, f"judge '{options.judge}'")
    return Judge(spec, options.judge, model, **kwargs)
