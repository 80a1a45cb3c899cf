"""Formats and checks of the debate game: debater turns, the judge's verdict, and the
arithmetic of CHECK lines. Parsers raise only clemcore's ParseError, whatever the input."""
from __future__ import annotations

import ast
import math
import operator
import re
from collections import Counter
from dataclasses import dataclass

from clemcore.clemgame.errors import ParseError

MAX_CHECKS = 3
MAX_EXPRESSION_CHARS = 120
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
NUMBER_IN_TEXT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass(frozen=True)
class Check:
    """A stated calculation `expression = claimed`."""

    expression: str
    claimed: float

    def value(self) -> float | None:
        return evaluate(self.expression)

    def holds(self) -> bool:
        value = self.value()
        return value is not None and same_number(value, self.claimed)


@dataclass(frozen=True)
class Turn:
    """A parsed debater turn."""

    argument: str
    checks: tuple[Check, ...]
    answer: float


def same_number(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def evaluate(expression: str) -> float | None:
    """The value of an arithmetic expression over numbers, + - * / and parentheses (unary
    minus allowed); None for anything else, a division by zero or a huge value."""
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_CHARS or not expression.isascii():
        return None
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Div) and right == 0:
                raise ZeroDivisionError
            return _OPS[type(node.op)](left, right)
        raise ValueError("not arithmetic")

    try:
        value = walk(tree)
    except (ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return None
    return value if math.isfinite(value) and abs(value) < 1e12 else None


def numbers_in(text: str) -> Counter:
    """The numbers written in a text, with their multiplicity."""
    return Counter(float(n) for n in NUMBER_IN_TEXT.findall(text or ""))


def uses_only(expression: str, allowed: Counter) -> bool:
    """Whether every number of `expression` is an allowed number, each used at most as
    often as it is allowed."""
    used = numbers_in(expression)
    return all(allowed.get(number, 0) >= count for number, count in used.items())


def _tagged(line: str, tag: str) -> str | None:
    head, colon, rest = line.partition(":")
    if colon and head.isascii() and head.strip().upper() == tag:
        return rest.strip()
    return None


def parse_number(text: str, response, what: str) -> float:
    if not NUMBER.match(text.replace(",", "")) or not text.isascii():
        raise ParseError(f"{what} must be a plain number, not '{text[:40]}'", response, key="number")
    return float(text.replace(",", ""))


def parse_turn(response) -> Turn:
    """`ARGUMENT: ...` (one or more lines), then up to three `CHECK: <calculation> = <number>`
    lines, then `ANSWER: <number>` as the last line."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
    if not lines:
        raise ParseError("empty response", response, key="empty")
    first = _tagged(lines[0], "ARGUMENT")
    if first is None:
        raise ParseError("the reply must start with 'ARGUMENT:'", response, key="argument")
    answer = _tagged(lines[-1], "ANSWER")
    if answer is None or len(lines) < 2:
        raise ParseError("the last line must be 'ANSWER: <number>'", response, key="answer")
    argument, checks, in_checks = [first], [], False
    for line in lines[1:-1]:
        for tag in ("ARGUMENT", "ANSWER"):
            if _tagged(line, tag) is not None:
                raise ParseError(f"'{tag}:' may appear only once", response, key="repeated")
        check = _tagged(line, "CHECK")
        if check is None:
            if in_checks:
                raise ParseError("nothing but CHECK lines may follow a CHECK line before ANSWER", response,
                                 key="order")
            argument.append(line)
            continue
        in_checks = True
        expression, equals, claimed = check.rpartition("=")
        if not equals or not expression.strip():
            raise ParseError("a check must read 'CHECK: <calculation> = <number>'", response, key="check")
        checks.append(Check(expression.strip(), parse_number(claimed.strip(), response, "a check's result")))
    if len(checks) > MAX_CHECKS:
        raise ParseError(f"at most {MAX_CHECKS} CHECK lines", response, key="check")
    text = "\n".join(argument).strip()
    if not text:
        raise ParseError("nothing follows 'ARGUMENT:'", response, key="argument")
    return Turn(text, tuple(checks), parse_number(answer, response, "the answer"))


def parse_verdict(response) -> str:
    """"A" or "B" from a reply whose last non-empty line is `VERDICT: A|B` (also `Debater A`);
    reasoning may come before it."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
    if not lines:
        raise ParseError("empty response", response, key="empty")
    verdict = _tagged(lines[-1], "VERDICT")
    if verdict is None:
        raise ParseError("the last line must be 'VERDICT: A' or 'VERDICT: B'", response, key="verdict")
    word = verdict.rstrip(".").strip().upper()
    word = word[len("DEBATER"):].strip() if word.startswith("DEBATER") else word
    if word not in ("A", "B"):
        raise ParseError("the verdict must be A or B", response, key="verdict")
    return word


def reachable_values(numbers: list[float]) -> set[float]:
    """Every value of + - * / over a sub-multiset of `numbers` (each used at most once, any
    bracketing): what a check restricted to these numbers can equal."""
    numbers = list(numbers)
    by_subset: dict[int, set[float]] = {1 << i: {n} for i, n in enumerate(numbers)}
    full = (1 << len(numbers)) - 1
    for mask in range(1, full + 1):
        if mask in by_subset:
            continue
        values = set()
        sub = (mask - 1) & mask
        while sub:
            other = mask ^ sub
            if sub < other:
                for x in by_subset[sub]:
                    for y in by_subset[other]:
                        values.update((x + y, x - y, y - x, x * y))
                        if y:
                            values.add(x / y)
                        if x:
                            values.add(y / x)
            sub = (sub - 1) & mask
        by_subset[mask] = {round(v, 9) for v in values}
    return set().union(*by_subset.values()) if by_subset else set()
