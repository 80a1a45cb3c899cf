"""User-facing errors. The CLI prints them as one line on stderr and exits with 2.

Internal errors (bugs) are never wrapped in these: they keep their traceback.
"""


class PlaypenError(Exception):
    """A mistake the user can fix: bad input, a missing file, an unknown name."""

    exit_code = 2


class RegistryError(PlaypenError):
    """A registry file (model_registry.json, game_registry.json, key.json) is malformed."""


class UnknownModelError(PlaypenError):
    """A model name resolves to no registry entry."""


class UnknownGameError(PlaypenError):
    """A game name resolves to no game folder."""


class GameLoadError(PlaypenError):
    """A game could not be loaded or set up (a missing Python dependency or data file, an
    incompatibility with the installed clemcore): the message names the game and the cause."""


class TrainerFileError(PlaypenError):
    """The trainer file passed to `playpen run` is missing or unusable."""


class MissingKeyError(PlaypenError):
    """A remote backend needs credentials that key.json does not provide."""


class ModelPreparationError(PlaypenError):
    """The embedded default model could not be prepared."""


class RolloutError(PlaypenError):
    """Bad rollout arguments: unknown roles or instances, nobody for a role."""


class DivergedModelError(PlaypenError):
    """The model's next-token scores hold NaN: its weights have diverged (no sampling from it)."""


class ContextOverflowError(PlaypenError):
    """A learner prompt does not fit the model's context window (the episode fails)."""


class PartnerError(PlaypenError):
    """A partner (teacher) could not answer: server down, calls failing after retries."""


class RemoteModelError(PartnerError):
    """A remote model's server cannot be reached, or its calls keep failing or timing out
    within the retry budget (the message names the model and the URL, never a key)."""


class RunLockedError(PlaypenError):
    """Another run (another process) is using the run folder."""


class RecordsError(PlaypenError):
    """The records folder cannot be created (exists already, not writable)."""


class DatasetError(PlaypenError):
    """Bad input to the dataset conversion (missing folder, unknown filter value) or to
    SFT (malformed dataset file, no trainable examples)."""


class WriteError(PlaypenError):
    """A file or folder could not be written: a full disk, no permission, a read-only file
    system (the message names the path; what was there before is untouched)."""


WRITE_ERRNOS = frozenset({28, 122, 13, 1, 30, 20, 21})
"""ENOSPC, EDQUOT, EACCES, EPERM, EROFS, ENOTDIR, EISDIR: an ``OSError`` with one of these is
the machine's state or a path given, not a bug; the CLI says it in one line (:class:`WriteError`)."""


def write_error(error: OSError, path=None) -> WriteError:
    """The one-line WriteError of an ``OSError`` from writing ``path``; without ``path``,
    the error's own file names (reading or writing: the error does not say which)."""
    if path is not None:
        return WriteError(f"cannot write {path}: {error.strerror or error}")
    names = " -> ".join(str(n) for n in (error.filename, error.filename2) if n is not None)
    return WriteError(f"{names}: {error.strerror}" if names and error.strerror else str(error))


class EvaluationError(PlaypenError):
    """Evaluation could not run or produced no scores (a user-fixable cause is named)."""


class AdapterError(PlaypenError):
    """An adapter folder is missing, not a PEFT adapter, or unusable with the model."""


class ResumeError(PlaypenError):
    """--resume was asked for but there is nothing (complete) to resume from."""


class TrainingSetupError(PlaypenError):
    """The games/roles/batch options do not make a valid training run."""


# the GRPO trainers' name for it (kept: scripts catch it)
GRPOSetupError = TrainingSetupError


class JudgeError(PlaypenError):
    """A judge (the self-rewarding trainer's) is unusable: its prompt template or score regex
    is missing or invalid, or none of its replies in a round gave a score."""


class RubricError(PlaypenError):
    """A rubric (playpen.training.rubrics) is unusable: a malformed rubric file, a term that
    names a role its game does not have, a weight that is no number."""


class PlotError(PlaypenError):
    """The run folder or log to plot is missing or empty."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal (SIGINT: Ctrl-C; SIGTERM: a timeout, a scheduler, ``docker
    stop``). Not a mistake: the CLI says so in one line and exits with ``128 + signum``
    (130, 143), so that ``playpen run ... && playpen eval ...`` stops."""

    def __init__(self, signum: int, message: str = ""):
        super().__init__(message)
        self.signum = signum


class EngineError(PlaypenError):
    """The chosen generation engine cannot run: vLLM not installed, its server not reachable,
    a learner it cannot serve."""
