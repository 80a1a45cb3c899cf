"""The checkable domain of the proposer-solver games: integer arithmetic with +, -, * and
parentheses. Parsing, exact evaluation, the reference solvers' mistake, difficulty, the
proposer's rules and its score. Stdlib only; every error a reply can cause is a clemcore
ParseError (format) or RuleViolationError (rules)."""
import re
from itertools import product

from clemcore.clemgame.errors import ParseError, RuleViolationError

PROBLEM_PREFIX = "PROBLEM:"
ANSWER_PREFIX = "ANSWER:"
OPERATORS = ("+", "-", "*")
MAX_CHARS = 200
MAX_OPERATORS = 8
MAX_NUMBER = 999
MAX_VALUE = 1_000_000
_TOKEN = re.compile(r"\s*(\d+|[+\-*()])")
_ANSWER = re.compile(r"-?\d{1,9}")


class ProblemFormatError(ParseError):
    """The proposer's reply is not ``PROBLEM: <expression>`` with a well-formed expression."""


class ProblemRuleError(RuleViolationError):
    """A well-formed problem that breaks the instance's rules (numbers, operators, size)."""


class AnswerFormatError(ParseError):
    """The solver's reply is not ``ANSWER: <integer>``."""


# --- expressions ------------------------------------------------------------------------------

def tokenize(text: str) -> list[str]:
    """The tokens of an expression; ProblemFormatError for any other character."""
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ProblemFormatError(f"unexpected character {text[position]!r} at position {position}",
                                     response=text, key="bad character")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def parse_expression(text: str):
    """The syntax tree of an expression: an int, or (operator, left, right).
    ``*`` binds tighter than ``+`` and ``-``; all are left-associative."""
    if len(text) > MAX_CHARS:
        raise ProblemFormatError(f"the expression is longer than {MAX_CHARS} characters", response=text[:80],
                                 key="too long")
    tokens = tokenize(text)
    if not tokens:
        raise ProblemFormatError("no expression", response=text, key="empty expression")
    tree, rest = _sum(tokens, 0, text)
    if rest != len(tokens):
        raise ProblemFormatError(f"unexpected {tokens[rest]!r} after a complete expression", response=text,
                                 key="trailing tokens")
    return tree


def _sum(tokens, i, text):
    left, i = _product(tokens, i, text)
    while i < len(tokens) and tokens[i] in ("+", "-"):
        right, j = _product(tokens, i + 1, text)
        left, i = (tokens[i], left, right), j
    return left, i


def _product(tokens, i, text):
    left, i = _atom(tokens, i, text)
    while i < len(tokens) and tokens[i] == "*":
        right, j = _atom(tokens, i + 1, text)
        left, i = ("*", left, right), j
    return left, i


def _atom(tokens, i, text):
    if i >= len(tokens):
        raise ProblemFormatError("the expression ends too early", response=text, key="incomplete")
    token = tokens[i]
    if token.isdigit():
        return int(token), i + 1
    if token == "(":
        inner, j = _sum(tokens, i + 1, text)
        if j >= len(tokens) or tokens[j] != ")":
            raise ProblemFormatError("a parenthesis is not closed", response=text, key="unbalanced")
        return ("()", inner), j + 1
    raise ProblemFormatError(f"expected a number or '(' but got {token!r}", response=text, key="syntax")


def evaluate(tree) -> int:
    if isinstance(tree, int):
        return tree
    if tree[0] == "()":
        return evaluate(tree[1])
    op, left, right = tree
    a, b = evaluate(left), evaluate(right)
    return a + b if op == "+" else a - b if op == "-" else a * b


def numbers_of(tree) -> list[int]:
    if isinstance(tree, int):
        return [tree]
    return [n for child in tree[1:] for n in numbers_of(child)]


def num_operators(tree) -> int:
    if isinstance(tree, int):
        return 0
    return (0 if tree[0] == "()" else 1) + sum(num_operators(child) for child in tree[1:])


def num_parentheses(tree) -> int:
    if isinstance(tree, int):
        return 0
    return (1 if tree[0] == "()" else 0) + sum(num_parentheses(child) for child in tree[1:])


def difficulty(tree) -> int:
    """Operators + parenthesis pairs: what a reference solver must keep track of."""
    return num_operators(tree) + num_parentheses(tree)


def left_to_right(text: str) -> int:
    """The reference solvers' mistake: parentheses ignored, every operator applied in reading order."""
    tokens = [t for t in tokenize(text) if t not in "()"]
    value = int(tokens[0])
    for op, number in zip(tokens[1::2], tokens[2::2]):
        value = value + int(number) if op == "+" else value - int(number) if op == "-" else value * int(number)
    return value


def render(tree) -> str:
    """An expression's canonical text (single spaces around operators)."""
    if isinstance(tree, int):
        return str(tree)
    if tree[0] == "()":
        return f"({render(tree[1])})"
    return f"{render(tree[1])} {tree[0]} {render(tree[2])}"


# --- replies -----------------------------------------------------------------------------------

def _after_prefix(response, prefix: str, error_class) -> str:
    if not isinstance(response, str):
        raise error_class(f"reply is not text but {type(response).__name__}", response=str(response),
                          key="not text")
    text = response.strip()
    if not text.startswith(prefix):
        raise error_class(f"reply does not start with '{prefix}'", response=response[:200], key="missing prefix")
    body = text[len(prefix):].strip()
    if not body:
        raise error_class(f"nothing follows '{prefix}'", response=response[:200], key="empty reply")
    if "\n" in body or "\r" in body:
        raise error_class("the reply has more than one line", response=response[:200], key="several lines")
    return body


def parse_problem(response) -> str:
    """The expression of ``PROBLEM: <expression>`` (a trailing '.' or '=' is dropped), in
    canonical form; ProblemFormatError otherwise."""
    body = _after_prefix(response, PROBLEM_PREFIX, ProblemFormatError).rstrip(".=").strip()
    return render(parse_expression(body))


def parse_answer(response) -> int:
    """The integer of ``ANSWER: <integer>`` (a trailing '.' is dropped); AnswerFormatError otherwise."""
    body = _after_prefix(response, ANSWER_PREFIX, AnswerFormatError).rstrip(".").strip().replace(",", "")
    if not _ANSWER.fullmatch(body):
        raise AnswerFormatError(f"'{body[:40]}' is not a whole number", response=response[:200], key="not a number")
    return int(body)


def check_problem(expression: str, numbers: list[int], max_operators: int) -> tuple[int, int]:
    """(value, difficulty) of a proposed problem; ProblemRuleError when it uses a number not
    given (or more often than given), has no operator or more than ``max_operators``, or a
    value beyond +-1,000,000."""
    tree = parse_expression(expression)
    available = list(numbers)
    for number in numbers_of(tree):
        if number not in available:
            raise ProblemRuleError(f"{number} is not among the numbers left to use ({sorted(available)})",
                                   response=expression, key="number not given")
        available.remove(number)
    operators = num_operators(tree)
    if operators == 0:
        raise ProblemRuleError("the problem has no operator", response=expression, key="no operator")
    if operators > max_operators:
        raise ProblemRuleError(f"{operators} operators; at most {max_operators} are allowed", response=expression,
                               key="too many operators")
    value = evaluate(tree)
    if abs(value) > MAX_VALUE:
        raise ProblemRuleError(f"the value {value} is beyond +-{MAX_VALUE}", response=expression, key="too large")
    return value, difficulty(tree)


# --- solving and scoring -----------------------------------------------------------------------

def reference_answer(expression: str, skill: int) -> int:
    """A reference solver of ``skill``: exact up to that difficulty, else reading order."""
    tree = parse_expression(expression)
    return evaluate(tree) if difficulty(tree) <= skill else left_to_right(expression)


def panel_solve_rate(expression: str, skills: list[int]) -> float:
    value = evaluate(parse_expression(expression))
    return sum(reference_answer(expression, s) == value for s in skills) / len(skills)


def proposer_score(solve_rate: float) -> float:
    """100 * (1 - |2 * rate - 1|): 100 when half of the solvers solve the problem, 0 when
    none or all do."""
    return 100.0 * (1.0 - abs(2.0 * solve_rate - 1.0))


def best_problem(numbers: list[int], max_operators: int, skills: list[int]) -> str:
    """The programmatic proposer: the first expression (fixed order: fewer numbers first,
    then operators + - *, then with the first two operands in parentheses) over a prefix of
    ``numbers`` that scores best with the panel ``skills``."""
    best, best_score = None, -1.0
    for count in range(2, min(len(numbers), max_operators + 1) + 1):
        operands = [str(n) for n in numbers[:count]]
        for ops in product(OPERATORS, repeat=count - 1):
            for bracket in (False, True):
                parts = [operands[0]]
                for op, operand in zip(ops, operands[1:]):
                    parts += [op, operand]
                if bracket and count > 2:
                    parts = ["(" + " ".join(parts[:3]) + ")"] + parts[3:]
                text = " ".join(parts)
                try:
                    check_problem(text, numbers, max_operators)
                except RuleViolationError:
                    continue
                score = proposer_score(panel_solve_rate(text, skills))
                if score > best_score:
                    best, best_score = text, score
    if best is None:
        raise ValueError(f"no valid problem with numbers {numbers}")
    return best


def problem_in(context_text: str) -> str:
    """The expression a solver is given: the text after the last 'PROBLEM:' in its context."""
    return context_text.rsplit(PROBLEM_PREFIX, 1)[-1].strip().splitlines()[0].strip()
