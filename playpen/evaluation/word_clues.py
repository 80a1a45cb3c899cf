"""``playpen_word_clues``: playpen's own static task, made from taboo's word bank.

Each question is one word of ``games/builtin/taboo/resources/words.json`` (hand-written for
playpen: see that file's description and the task's README): its first clue sentence, and
four candidate words — the word and three other words of the bank drawn by a seeded RNG,
in a shuffled order. lm-eval scores each candidate's log-likelihood after the clue
(multiple choice; chance is 25%). The questions are generated once into
``tasks/playpen_word_clues/questions.jsonl`` (:func:`write_questions`) so that the task
stays the same when the word bank grows; a test checks that the file is what this module
makes. lm-eval reads the file through :func:`load_docs` (the YAML's ``custom_dataset``),
offline.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from playpen.games import GAMES_DIR

TASK_DIR = Path(__file__).resolve().parent / "tasks" / "playpen_word_clues"
QUESTIONS_FILE = TASK_DIR / "questions.jsonl"
SEED = 2026
NUM_CHOICES = 4


def words_file() -> Path:
    return GAMES_DIR / "builtin" / "taboo" / "resources" / "words.json"


def make_questions(path: Path | None = None, seed: int = SEED) -> list[dict]:
    """``{"word", "clue", "choices", "answer"}`` per word of the bank, in the bank's order."""
    entries = json.loads(Path(path or words_file()).read_text(encoding="utf-8"))["words"]
    words = [e["word"] for e in entries]
    rng = random.Random(seed)
    questions = []
    for entry in entries:
        others = rng.sample([w for w in words if w != entry["word"]], NUM_CHOICES - 1)
        choices = [entry["word"], *others]
        rng.shuffle(choices)
        questions.append({"word": entry["word"], "clue": entry["clues"][0], "choices": choices,
                          "answer": choices.index(entry["word"])})
    return questions


def write_questions(path: Path = QUESTIONS_FILE) -> Path:
    """Regenerate the shipped questions file (after a deliberate change of the task)."""
    lines = [json.dumps(q, ensure_ascii=False) for q in make_questions()]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Path(path)


def load_docs(**_metadata):
    """lm-eval's ``custom_dataset``: the shipped questions as a ``test`` split (lm-eval passes
    the task's metadata as keywords; none is needed)."""
    import datasets
    rows = [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
