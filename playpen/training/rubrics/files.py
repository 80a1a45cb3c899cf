"""Rubric files: a rubric (:mod:`playpen.training.rubrics`) written as JSON, checked before
any model loads.

    python -m playpen.training.rubrics.files RUBRIC.json     # check a file, list its terms

:func:`read_rubric` checks the game and its roles (clemgame.json ``roles``), every term's
kind and fields, the judge models (registered and able to judge; nothing is loaded), the
judge templates and regexes; any mistake is one line naming the file and the term —
:class:`~playpen.errors.RubricError` (or the registry's error for an unknown model or
game), exit code 2 in playpen's CLI and in the command above. :meth:`RubricSpec.build`
then loads the judges and returns the :class:`~playpen.training.rubrics.rubric.Rubric`. The
format is in docs/rubrics.md.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from playpen.errors import PlaypenError, RubricError
from playpen.training.rubrics.judging import JudgeOptions, check_judge, load_judge, template_path
from playpen.training.rubrics.rubric import (SCOPES, CheckTerm, JudgeTerm, LengthCheck, OutcomeTerm, RegexCheck,
                                             RewardTerm, Rubric, RubricScores, ScoreTerm, Term, Weighted, game_roles)

KINDS = ("outcome", "reward", "score", "check", "judge")
RUBRIC_HELP = ("a rubric file (JSON, docs/rubrics.md): per-player rewards of its game's episodes (outcome, "
               "scores, checks, judges) instead of --reward; checked before any model loads")


@dataclass(frozen=True)
class RubricSpec:
    """A checked rubric file: nothing is loaded yet (:meth:`build` loads the judges)."""

    path: str
    game: str
    roles: tuple[str, ...]
    terms: tuple[dict, ...]
    retries: int = 2
    reask: int = 0

    def build(self, learner: Any = None, log_file: Optional[Union[str, Path]] = None,
              judges: Optional[Mapping[str, Any]] = None) -> Rubric:
        """The rubric, its judges loaded by name (`judges` maps a judge name to a ready
        :class:`~playpen.training.rubrics.judging.Judge` instead; `learner`: for ``"model": "learner"``)."""
        loaded, terms = dict(judges or {}), []
        for entry in self.terms:
            kind = entry["kind"]
            if kind == "outcome":
                term: Term = OutcomeTerm()
            elif kind == "reward":
                term = RewardTerm(float(entry.get("missing", 0.0)))
            elif kind == "score":
                term = ScoreTerm(entry["key"], float(entry.get("scale", 1.0)), float(entry.get("missing", 0.0)))
            elif kind == "check":
                check = (RegexCheck(entry["pattern"]) if entry["check"] == "regex"
                         else LengthCheck(int(entry["max_chars"])))
                term = CheckTerm(check, f"check:{entry['check']}")
            else:
                options = judge_options(entry, self.path)
                key = entry["model"]
                if key not in loaded:
                    loaded[key] = load_judge(options, learner)
                term = JudgeTerm(loaded[key], entry.get("scope", "last_turn"), float(entry.get("missing", 0.0)))
            roles = tuple(entry["roles"]) if entry.get("roles") else None
            terms.append(Weighted(term, float(entry.get("weight", 1.0)), roles))
        return Rubric(self.game, terms, roles=self.roles, retries=self.retries, reask=self.reask, log_file=log_file)


def judge_options(entry: dict, path: str):
    return JudgeOptions(judge=entry["model"], judge_template=entry.get("template", "additive"),
                        score_regex=_relative(entry.get("regex", ""), path),
                        score_min=float(entry.get("score_min", 0.0)), score_max=float(entry.get("score_max", 5.0)),
                        judge_max_tokens=int(entry.get("max_tokens", 128)),
                        judge_batch_size=int(entry.get("batch_size", 8)))


def _relative(value: str, path: str) -> str:
    """A template or regex file named in a rubric file is relative to that file."""
    if not value:
        return value
    candidate = Path(path).parent / value
    return str(candidate) if candidate.exists() and not Path(value).is_absolute() else value


TERM_FIELDS = {"outcome": set(), "reward": {"missing"}, "score": {"key", "scale", "missing"},
               "check": {"check", "pattern", "max_chars"},
               "judge": {"model", "template", "regex", "score_min", "score_max", "scope", "missing", "max_tokens",
                         "batch_size"}}
COMMON_FIELDS = {"kind", "weight", "roles"}


def read_rubric(path: Union[str, Path]) -> RubricSpec:
    """Read and check a rubric file without loading any model: the game and its roles,
    every term's kind and fields, judge models (registered, able to judge), templates
    and regexes. Any mistake: one line naming the file, the term and what is valid."""
    path = Path(path)
    where = f"rubric {path}"
    if not path.is_file():
        raise RubricError(f"{where}: no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RubricError(f"{where}:{e.lineno}: malformed JSON: {e.msg}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise RubricError(f"{where}: cannot read: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("game"), str) or not isinstance(data.get("terms"), list):
        raise RubricError(f"{where}: expected an object with \"game\" (a game name) and \"terms\" (a list)")
    unknown = set(data) - {"game", "terms", "retries", "reask"}
    if unknown:
        raise RubricError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (valid: game, terms, retries, reask)")
    game = data["game"]
    roles = game_roles(game)
    if not data["terms"]:
        raise RubricError(f"{where}: \"terms\" is empty")
    for number, entry in enumerate(data["terms"], start=1):
        term_where = f"{where}: term {number}"
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
            kind = entry.get("kind") if isinstance(entry, dict) else entry
            raise RubricError(f"{term_where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        kind = entry["kind"]
        extra = set(entry) - COMMON_FIELDS - TERM_FIELDS[kind]
        if extra:
            raise RubricError(f"{term_where} ({kind}): unknown field(s) {', '.join(sorted(extra))} (valid: "
                              f"{', '.join(sorted(COMMON_FIELDS | TERM_FIELDS[kind]))})")
        weight = entry.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise RubricError(f"{term_where} ({kind}): weight {weight!r} is not a finite number")
        named = entry.get("roles")
        if named is not None:
            if not isinstance(named, list) or not named or not all(isinstance(r, str) for r in named):
                raise RubricError(f"{term_where} ({kind}): \"roles\" must be a non-empty list of role names")
            for role in named:
                if role not in roles:
                    raise RubricError(f"{term_where} ({kind}): unknown role '{role}' for game '{game}' "
                                      f"(its roles: {', '.join(roles)})")
        if kind == "score" and not isinstance(entry.get("key"), str):
            raise RubricError(f"{term_where} (score): \"key\" (the episode score to read) is missing")
        if kind == "score" and not _positive(entry.get("scale", 1.0)):
            raise RubricError(f"{term_where} (score): \"scale\" must be a positive number")
        if kind == "check":
            if entry.get("check") == "regex":
                try:
                    re.compile(entry.get("pattern"))
                except (re.error, TypeError) as e:
                    raise RubricError(f"{term_where} (check regex): \"pattern\" is no valid regex: {e}") from e
            elif entry.get("check") == "max_chars":
                if not _positive(entry.get("max_chars")):
                    raise RubricError(f"{term_where} (check max_chars): \"max_chars\" must be a positive number")
            else:
                raise RubricError(f"{term_where}: check {entry.get('check')!r} is not one of regex, max_chars")
        for name in ("scale", "missing", "score_min", "score_max"):
            if name in entry and (isinstance(entry[name], bool) or not isinstance(entry[name], (int, float))
                                  or not math.isfinite(entry[name])):
                raise RubricError(f"{term_where} ({kind}): \"{name}\" must be a number")
        for name in ("max_tokens", "batch_size", "max_chars"):
            if name in entry and (isinstance(entry[name], bool) or not isinstance(entry[name], int) or entry[name] < 1):
                raise RubricError(f"{term_where} ({kind}): \"{name}\" must be a whole number >= 1")
        if kind == "judge":
            if not isinstance(entry.get("model"), str) or not entry["model"]:
                raise RubricError(f"{term_where} (judge): \"model\" (a registered model name, or learner) is missing")
            if entry.get("scope", "last_turn") not in SCOPES:
                raise RubricError(f"{term_where} (judge): scope {entry.get('scope')!r} is not one of "
                                  f"{', '.join(SCOPES)}")
            template = entry.get("template", "additive")
            if isinstance(template, str) and not template_path(template).is_file():
                entry = {**entry, "template": str(Path(path).parent / template)}
            options = judge_options(entry, str(path))
            try:
                if not options.score_min < options.score_max:
                    raise RubricError(f"score_min {options.score_min:g} must be below score_max "
                                      f"{options.score_max:g}")
                options.judge_spec()  # the template renders, the regex compiles
                check_judge(options)
            except PlaypenError as e:
                raise type(e)(f"{term_where} (judge): {e}") from e
            data["terms"][number - 1] = entry
    retries, reask = data.get("retries", 2), data.get("reask", 0)
    for name, value in (("retries", retries), ("reask", reask)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RubricError(f"{where}: \"{name}\" must be a whole number >= 0")
    return RubricSpec(str(path), game, roles, tuple(data["terms"]), retries, reask)


def check_rubric_option(path: str, games: Sequence[str], option_name: str = "--rubric") -> Optional[RubricSpec]:
    """A trainer's ``--rubric FILE``, before any model loads: the file checked by
    :func:`read_rubric` and its game one of ``games`` (those the run plays); None when no
    file is given. A mistake: the error of :func:`read_rubric` (one line, exit code 2),
    prefixed with the option."""
    if not path:
        return None
    try:
        spec = read_rubric(path)
    except PlaypenError as e:
        raise type(e)(f"option {option_name}: {e}") from e
    if spec.game not in games:
        raise RubricError(f"option {option_name}: rubric {path} is for game '{spec.game}', which this run does not "
                          f"train (its games: {', '.join(games)})")
    return spec


def merged_metrics(scores: Sequence[Any]) -> dict[str, float]:
    """The ``rubric/*`` metrics of several :class:`~playpen.training.rubrics.rubric.RubricScores`
    (one per rollout call of a step) as one: judge counts summed, rewards per role averaged."""
    return RubricScores(tuple(r for s in scores for r in s.rewards), sum(s.judge_requests for s in scores),
                        sum(s.judge_unparsable for s in scores), sum(s.judge_retries for s in scores)).metrics()


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m playpen.training.rubrics.files FILE``: check a rubric file, print its terms."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m playpen.training.rubrics.files RUBRIC.json  (checks the file; loads no model)")
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        spec = read_rubric(args[0])
    except PlaypenError as e:
        print(f"playpen: error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"rubric {spec.path}: game {spec.game} (roles: {', '.join(spec.roles)})")
    for number, entry in enumerate(spec.terms, start=1):
        detail = {k: v for k, v in entry.items() if k not in ("kind", "weight", "roles")}
        print(f"  {number}. {entry['kind']:<8} weight {entry.get('weight', 1.0):g}  roles "
              f"{', '.join(entry.get('roles') or ['all'])}  {json.dumps(detail) if detail else ''}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
