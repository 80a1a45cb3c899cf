"""A population: named players on ONE base model.

Every adapter player is a LoRA adapter of one shared peft model (a population of N
players costs about one model); the bare base is the player whose rows run with peft's
``"__base__"`` (adapters disabled); other players are partners the rollout engine knows
(``programmatic``, a registered model name: local or remote). Each player carries a
JSON-able spec (``{"role": "main_exploiter", "epoch": 3}``) and the population is saved
as ``population.json`` plus one adapter folder per adapter player.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from playpen.errors import PlaypenError
from playpen.files import write_json
from playpen.models import check_adapter, load_init_adapter
from playpen.registry import close_matches
from playpen.rollouts.types import Learner, SamplingConfig

BASE = "__base__"
"""peft's name for the rows of a mixed batch that run without any adapter."""
KINDS = ("adapter", "base", "partner")
POPULATION_FILE = "population.json"


class PopulationError(PlaypenError):
    """A population or player spec that cannot work (exit code 2)."""


@dataclass(frozen=True)
class PlayerSpec:
    """One player: its name, what answers its turns and free JSON-able facts about it.

    ``kind``: ``adapter`` (a LoRA adapter of the population's model, named ``name``),
    ``base`` (the bare base model) or ``partner`` (``partner`` is what the rollout engine
    takes: ``"programmatic"`` or a registered model name). ``info``: e.g.
    ``{"role": "main_exploiter", "epoch": 3}``; ``frozen``: never trained again.
    """

    name: str
    kind: str = "adapter"
    info: Mapping[str, Any] = field(default_factory=dict)
    partner: Optional[str] = None
    frozen: bool = False

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str) or "/" in self.name or self.name == BASE:
            raise PopulationError(f"player name {self.name!r} is not valid: a non-empty name without '/', "
                                  f"other than '{BASE}'")
        if self.kind not in KINDS:
            raise PopulationError(f"player '{self.name}': kind '{self.kind}' is not one of {', '.join(KINDS)}")
        if (self.kind == "partner") != bool(self.partner):
            raise PopulationError(f"player '{self.name}': a partner player names its partner (programmatic or a "
                                  f"registered model), the other kinds none")
        try:
            json.dumps(dict(self.info))
        except (TypeError, ValueError) as e:
            raise PopulationError(f"player '{self.name}': info is not JSON-able ({e})") from None

    def to_json(self) -> dict:
        return {**asdict(self), "info": dict(self.info)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PlayerSpec":
        return cls(name=data["name"], kind=data.get("kind", "adapter"), info=dict(data.get("info") or {}),
                   partner=data.get("partner"), frozen=bool(data.get("frozen", False)))


class Population:
    """Named players sharing ``model`` (a causal LM; wrapped into a peft model on the
    first adapter) and ``tokenizer``.

    Args:
        model: the base model (a ``PreTrainedModel``) or a peft model over it.
        tokenizer: its tokenizer.
        base_name: the base model's hub id or folder: adapters trained on another base are
            refused (one line, exit 2).
        lora_config: the ``LoraConfig`` of new adapters (:meth:`add_adapter` without a path).
    """

    def __init__(self, model: Any, tokenizer: Any, base_name: str = "", lora_config: Any = None):
        self.model, self.tokenizer, self.base_name, self.lora_config = model, tokenizer, base_name, lora_config
        self.players: dict[str, PlayerSpec] = {}

    # ------------------------------------------------------------------ players
    def __contains__(self, name: str) -> bool:
        return name in self.players

    def __len__(self) -> int:
        return len(self.players)

    def names(self, kind: Optional[str] = None) -> list[str]:
        return [n for n, s in self.players.items() if kind is None or s.kind == kind]

    def spec(self, name: str) -> PlayerSpec:
        if name not in self.players:
            raise PopulationError(f"no player '{name}' in the population.{close_matches(name, list(self.players))} "
                                  f"Players: {', '.join(self.players) or 'none'}")
        return self.players[name]

    def _new(self, spec: PlayerSpec) -> PlayerSpec:
        if spec.name in self.players:
            raise PopulationError(f"player '{spec.name}' is already in the population")
        self.players[spec.name] = spec
        return spec

    def add_base(self, name: str = "base", info: Optional[Mapping[str, Any]] = None) -> PlayerSpec:
        """The bare base model as a player (``"__base__"`` rows of a mixed batch)."""
        return self._new(PlayerSpec(name, "base", dict(info or {}), frozen=True))

    def add_partner(self, name: str, partner: str, info: Optional[Mapping[str, Any]] = None) -> PlayerSpec:
        """A player answered by the rollout engine's partner ``partner`` (``programmatic``,
        a registered model name: local or remote)."""
        return self._new(PlayerSpec(name, "partner", dict(info or {}), partner=partner, frozen=True))

    def add_adapter(self, name: str, info: Optional[Mapping[str, Any]] = None, *, path: Optional[str] = None,
                    copy_of: Optional[str] = None, frozen: bool = False) -> PlayerSpec:
        """An adapter player: loaded from ``path`` (a peft adapter folder trained on this
        base), a copy of player ``copy_of``'s adapter weights, or a fresh adapter of
        ``lora_config``. Its weights are frozen (no gradient) until :meth:`trainable`."""
        spec = PlayerSpec(name, "adapter", dict(info or {}), frozen=frozen)
        if name in self.players:
            raise PopulationError(f"player '{name}' is already in the population")
        if path is not None:
            folder = check_adapter(path, self.base_name or None)
            peft = self._peft(load_from=folder, name=name)
            if peft is not None:
                peft.load_adapter(str(folder), adapter_name=name, is_trainable=True)
        elif copy_of is not None:
            source = self.spec(copy_of)
            if source.kind != "adapter":
                raise PopulationError(f"player '{name}': cannot copy '{copy_of}', a {source.kind} player")
            from peft import get_peft_model_state_dict, set_peft_model_state_dict
            peft = self.model
            peft.add_adapter(name, peft.peft_config[copy_of])
            weights = get_peft_model_state_dict(peft, adapter_name=copy_of)
            set_peft_model_state_dict(peft, {k: v.detach().clone() for k, v in weights.items()}, adapter_name=name)
        else:
            if self.lora_config is None:
                raise PopulationError(f"player '{name}': a new adapter needs the population's lora_config "
                                      f"(or a path to load, or a player to copy)")
            peft = self._peft(config=self.lora_config, name=name)
            if peft is not None:
                peft.add_adapter(name, self.lora_config)
        self.freeze()
        return self._new(spec)

    def _peft(self, name: str, config: Any = None, load_from: Optional[Path] = None):
        """The population's peft model, made on the first adapter (which it creates: then
        None is returned); later adapters are added to it by the caller."""
        if hasattr(self.model, "peft_config"):
            return self.model
        from peft import get_peft_model
        if load_from is not None:
            self.model = load_init_adapter(self.model, load_from, name=name)
        else:
            self.model = get_peft_model(self.model, config, adapter_name=name)
        return None

    def remove(self, name: str) -> None:
        """Drop a player (an adapter player's weights leave the model)."""
        spec = self.spec(name)
        if spec.kind == "adapter":
            self.model.delete_adapter(name)
        del self.players[name]

    def reset(self, name: str, copy_of: Optional[str] = None) -> None:
        """Re-initialise an adapter player (an exploiter reset): fresh weights of
        ``lora_config``, or a copy of ``copy_of``'s."""
        spec = self.spec(name)
        self.remove(name)
        self.add_adapter(name, spec.info, copy_of=copy_of, frozen=spec.frozen)

    # ------------------------------------------------------------------ training views
    def freeze(self) -> None:
        """No adapter weight takes a gradient."""
        for _, param in self.model.named_parameters():
            param.requires_grad_(False)

    def trainable(self, name: str) -> list:
        """Make player ``name``'s adapter (only) trainable and active; its parameters."""
        spec = self.spec(name)
        if spec.kind != "adapter":
            raise PopulationError(f"player '{name}' is a {spec.kind} player: only adapter players train")
        if spec.frozen:
            raise PopulationError(f"player '{name}' is frozen")
        self.freeze()
        self.model.set_adapter(name)
        params = []
        for param_name, param in self.model.named_parameters():
            if f".{name}." in param_name:
                param.requires_grad_(True)
                params.append(param)
        return params

    def set_frozen(self, name: str, frozen: bool = True) -> None:
        spec = self.spec(name)
        self.players[name] = PlayerSpec(spec.name, spec.kind, spec.info, spec.partner, frozen)

    def adapter_weights(self, name: str) -> dict:
        """CPU copies of an adapter player's weights (for tests and snapshots)."""
        from peft import get_peft_model_state_dict
        return {k: v.detach().to("cpu", copy=True)
                for k, v in get_peft_model_state_dict(self.model, adapter_name=name).items()}

    # ------------------------------------------------------------------ rollout views
    def adapter_of(self, name: str) -> str:
        """The peft adapter name of an adapter or base player's rows."""
        spec = self.spec(name)
        if spec.kind == "partner":
            raise PopulationError(f"player '{name}' is answered by '{spec.partner}', not by an adapter")
        return name if spec.kind == "adapter" else BASE

    def learner(self, name: str, sampling: Any = None):
        """Player ``name`` as a rollout :class:`~playpen.rollouts.Learner` (adapter or base
        rows of the shared model) — or, for a partner player, its partner name."""
        spec = self.spec(name)
        if spec.kind == "partner":
            return spec.partner
        if not hasattr(self.model, "peft_config"):
            raise PopulationError(f"player '{name}': the population has no adapter yet; add one before playing "
                                  f"the base against itself (a plain model needs no population)")
        return Learner(self.model, self.tokenizer, name, sampling or SamplingConfig(), adapter=self.adapter_of(name))

    # ------------------------------------------------------------------ files
    def save(self, folder: str | Path, update: bool = False) -> Path:
        """Write ``population.json`` and ``adapters/<name>/`` into ``folder``. A folder
        holding a population is refused, unless ``update``: then the adapters not saved yet
        are added and ``population.json`` is rewritten (a saved adapter is never rewritten:
        save a player once it is frozen)."""
        folder = Path(folder)
        if (folder / POPULATION_FILE).exists() and not update:
            raise PopulationError(f"{folder / POPULATION_FILE} exists already: save a population into a new folder")
        names = list(self.players)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            if name == "default":
                raise PopulationError("an adapter player cannot be named 'default' (peft's unnamed adapter)")
            if self.players[name].kind == "adapter" and not (folder / "adapters" / name).is_dir():
                self.model.save_pretrained(str(folder / "adapters"), selected_adapters=[name])
        data = {"base_model": self.base_name, "players": [self.players[n].to_json() for n in names]}
        write_json(folder / POPULATION_FILE, data)
        return folder

    @classmethod
    def load(cls, folder: str | Path, model: Any, tokenizer: Any, base_name: str = "",
             lora_config: Any = None, names: Optional[Sequence[str]] = None) -> "Population":
        """A population saved by :meth:`save`, its adapters loaded onto ``model``; with
        ``names`` only those players (a run resumed from an earlier epoch's checkpoint)."""
        folder = Path(folder)
        file = folder / POPULATION_FILE
        if not file.is_file():
            raise PopulationError(f"{folder} holds no {POPULATION_FILE}: not a saved population")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            specs = [PlayerSpec.from_json(p) for p in data["players"]]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise PopulationError(f"{file}: not a population file ({type(e).__name__}: {e})") from None
        population = cls(model, tokenizer, base_name or data.get("base_model", ""), lora_config)
        missing = sorted(set(names or ()) - {spec.name for spec in specs})
        if missing:
            raise PopulationError(f"{file}: no player {', '.join(missing)}")
        for spec in specs:
            if names is not None and spec.name not in names:
                continue
            if spec.kind == "adapter":
                # peft saves a non-default adapter into a sub-folder of its name
                path = folder / "adapters" / spec.name
                if not path.is_dir():
                    raise PopulationError(f"{file}: player '{spec.name}' has no adapter folder {path}")
                population.add_adapter(spec.name, spec.info, path=str(path), frozen=spec.frozen)
            else:
                population._new(spec)
        return population

