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


class TrainerFileError(PlaypenError):
    """The trainer file passed to `playpen run` is missing or unusable."""


class MissingKeyError(PlaypenError):
    """A remote backend needs credentials that key.json does not provide."""


class ModelPreparationError(PlaypenError):
    """The embedded default model could not be prepared."""
