"""The package's shape: imports flow one way (no cycle between playpen's modules, counting
imports inside functions too), imports sit at the top of a module unless they are heavy, and
no module grows past ~400 lines without saying why."""
import ast
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "playpen"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "builtin" in path.relative_to(PACKAGE).parts:  # game folders: clemcore's, not ours
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports_of(name: str, path: Path, known: set[str], node) -> set[str]:
    """The playpen modules that one import statement of `name` imports (the longest known prefix)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = []
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        # `from pkg import submodule` needs the submodule; `from pkg import name`, the package
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                   for alias in node.names]
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """playpen modules that `name` imports anywhere in its file (the longest known prefix)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= _imports_of(name, path, known, node)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]):
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_cycle_between_playpen_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_modules_stay_readable_in_one_sitting():
    too_long = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and "Longer than" not in text[:3000]:
            too_long.append(f"{name} ({text.count(chr(10))} lines)")
    assert not too_long, f"modules over {MAX_LINES} lines without a reason at their top: {too_long}"


STAGES = ["playpen.registry", "playpen.models", "playpen.envs", "playpen.inference", "playpen.rollouts",
          ("playpen.data", "playpen.pairs", "playpen.evaluation"), "playpen.training", "playpen.population",
          "playpen.cli"]


def test_the_data_flows_one_way():
    """Earlier stages never import later ones: registry -> models -> envs -> inference ->
    rollouts -> data and evaluation -> training -> population -> cli (the README's "Where
    things are")."""
    graph = import_graph()
    order = STAGES

    def layer(module):
        return next((i for i, prefixes in enumerate(order)
                     for prefix in ((prefixes,) if isinstance(prefixes, str) else prefixes)
                     if module == prefix or module.startswith(prefix + ".")), None)
    wrong = [f"{a} -> {b}" for a, targets in graph.items() for b in targets
             if layer(a) is not None and layer(b) is not None and layer(b) > layer(a)]
    assert not wrong, f"imports against the flow: {wrong}"


def test_every_stage_is_a_module_and_inference_comes_before_rollouts():
    """A stage the graph does not know would silently check nothing; generation is its own
    stage, under the rollouts that call it (issue 29)."""
    known = set(import_graph())
    assert [stage for stages in STAGES for stage in ([stages] if isinstance(stages, str) else stages)
            if stage not in known] == []
    assert STAGES.index("playpen.inference") < STAGES.index("playpen.rollouts")


# ----------------------------------------------------------------------------- imports at the top

HEAVY = {"torch", "transformers", "trl", "peft", "accelerate", "clemcore"}

# where a function may import a torch-free playpen module, and why (keep it short)
FUNCTION_IMPORTS_ALLOWED = {
    "playpen.cli": "`playpen --help` imports every command's module (click shows each one's help): a command "
                   "imports the library it runs when it runs, so that the help stays instant",
}


def _is_type_checking(node) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def _imports_by_place(name: str, path: Path, known: set[str]):
    """(playpen modules imported when the module loads, third-party top-level packages imported
    then, [(line, playpen module) imported inside a function])."""
    top, third, inside = set(), set(), []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = _imports_of(name, path, known, child)
                if in_function:
                    inside.extend((child.lineno, target) for target in sorted(targets))
                else:
                    top.update(targets)
                    roots = [a.name for a in child.names] if isinstance(child, ast.Import) else \
                        ([child.module] if child.module and not child.level else [])
                    third.update(root.split(".")[0] for root in roots)
            visit(child, in_function)
    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, third, inside


def heavy_modules() -> set[str]:
    """playpen modules whose import loads torch, transformers, TRL, PEFT, accelerate or clemcore
    (through their own top-level imports, their packages' or the modules they import so)."""
    modules = _modules()
    known = set(modules)
    found = {name: _imports_by_place(name, path, known) for name, path in modules.items()}

    def loads(name):  # a module and the packages above it
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & known

    heavy, changed = {name for name, (_, third, _) in found.items() if third & HEAVY}, True
    while changed:
        changed = False
        for name, (top, _, _) in found.items():
            if name not in heavy and any(loads(target) & heavy for target in top | loads(name) - {name}):
                heavy.add(name)
                changed = True
    return heavy


def test_imports_of_light_modules_sit_at_the_top():
    """A function imports a playpen module only where the module is heavy (torch & co.: kept
    off `playpen --help`'s path) or where FUNCTION_IMPORTS_ALLOWED says why; every other import
    is at the top, where a reader sees what a module depends on."""
    modules = _modules()
    known = set(modules)
    heavy = heavy_modules()
    inside = []
    for name, path in modules.items():
        if any(name == allowed or name.startswith(allowed + ".") for allowed in FUNCTION_IMPORTS_ALLOWED):
            continue
        for line, target in _imports_by_place(name, path, known)[2]:
            if target not in heavy:
                inside.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not inside, "imports of torch-free modules inside functions (move them to the top): " + str(inside)


def test_the_heavy_modules_are_found():
    heavy = heavy_modules()
    assert {"playpen.training.trl_trainers", "playpen.training.shared_prefix"} <= heavy
    assert not {"playpen.registry", "playpen.errors", "playpen.cli", "playpen.rollouts.types"} & heavy


def test_every_playpen_name_that_scripts_import_exists():
    """A move inside the package once broke benchmarks/rollouts.py (`from playpen.rollouts
    import registry`) with nothing in the suite to notice: every `from playpen... import X`
    in the package, the examples and the benchmarks (inside functions too) must resolve."""
    import importlib
    root = PACKAGE.parent
    files = [p for p in [*PACKAGE.rglob("*.py"), *(root / "examples").rglob("*.py"), *(root / "benchmarks").glob("*.py")]
             if "builtin" not in p.parts]
    missing = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("playpen")):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name == "*" or hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    missing.append(f"{path.relative_to(root)}: from {node.module} import {alias.name}")
    assert not missing, missing


def test_benchmark_scripts_import_the_harness_not_each_other():
    """What the benchmark scripts share lives in benchmarks/harness.py; a script imports it and
    its own companions (``<script>_*.py``: learning_report, protocol_splits), never another
    script (protocol.py once took its Setting from learning.py through sys.path)."""
    folder = PACKAGE.parent / "benchmarks"
    sources = {p.stem: p.read_text(encoding="utf-8") for p in folder.glob("*.py")}
    scripts = {name for name, text in sources.items() if 'if __name__ == "__main__":' in text}
    wrong = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                targets = [node.module or ""]
            else:
                continue
            wrong += [f"{name}.py imports {t}" for t in targets
                      if t in scripts and t != name and not t.startswith(f"{name}_")]
    assert "harness" in sources and "harness" not in scripts
    assert not wrong, wrong


IMPORT_HOOKS = ("sys.meta_path", "sys.path_hooks", "MetaPathFinder", "PathEntryFinder", "importlib.abc.Loader")


def shims_in(source: str, is_package: bool) -> list[str]:
    """What makes a module a compatibility shim for old import paths: an import hook, a star
    import (a package re-exporting a module it replaced), a package-level ``__getattr__``
    answering names that live elsewhere. The project has had no release to be compatible with
    (issue 40 deleted the import hook for 24 old module paths and the star re-exports of six family
    packages)."""
    found = [f"import hook ({hook})" for hook in IMPORT_HOOKS if hook in source]
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            found.append(f"star import from {node.module}")
        if is_package and isinstance(node, (ast.FunctionDef, ast.Assign)) and "__getattr__" in (
                [node.name] if isinstance(node, ast.FunctionDef) else [getattr(t, "id", "") for t in node.targets]):
            found.append("package __getattr__")
    return found


# the top-level package's __getattr__ is its lazy public API (an explicit table of names, so that
# `import playpen` loads no torch), not a forwarder of old paths
LAZY_EXPORTS = {"playpen"}


def test_no_shim_for_old_import_paths():
    shims = {name: found for name, path in _modules().items() if name not in LAZY_EXPORTS
             if (found := shims_in(path.read_text(encoding="utf-8"), path.name == "__init__.py"))}
    assert not shims, shims


def test_the_shim_finder_finds_the_shims_that_were_deleted():
    assert shims_in("from playpen.training.grpo.rollout_bridge import *  # noqa: F401,F403\n", True) == [
        "star import from playpen.training.grpo.rollout_bridge"]
    assert shims_in("__getattr__ = former_names(__name__, _former)\n", True) == ["package __getattr__"]
    assert shims_in("import sys\ndef install():\n    sys.meta_path.insert(0, Finder())\n", False) == [
        "import hook (sys.meta_path)"]
    assert shims_in("from playpen.training.grpo.rollout_bridge import training_slots\n", True) == []


def test_trainer_modules_share_one_name():
    """A family's trainers live in ``trainer.py`` (TRL's ``<algo>_trainer.py``), never ``trainers.py``;
    and nothing that holds a trainer is called ``playpen`` (the package's own name)."""
    plural = [name for name in _modules() if name.rpartition(".")[2] == "trainers"]
    assert not plural, plural
    for family in ("sft", "grpo", "preference", "expert_iteration", "spag", "hierarchy", "pipeline"):
        assert f"playpen.training.{family}.trainer" in _modules(), family
    named_playpen = [f"{name}:{node.lineno}" for name, path in _modules().items()
                     for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.arg) and node.arg == "playpen"
                     or isinstance(node, ast.Attribute) and node.attr == "playpen"]
    assert not named_playpen, named_playpen


def code_of(source: str) -> str:
    """`source` without its comments, strings (docstrings included) and spaces: what runs, its
    tokens run together (``torch.clamp(ratio,1.0-clip)``)."""
    kept = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type not in (tokenize.COMMENT, tokenize.STRING)]
    return "".join(kept)


# a job's code -> the one module that writes it (issue 40: the own-loop trainers had their own
# AdamW loops, the clipped policy-gradient loss and token log-probs were written three times,
# SFTConfig again in expert iteration, PeftModel.from_pretrained(init_adapter) in ten places)
ONE_OWNER = {
    "torch.optim.": {"training/common/optimization.py"},
    "clip_grad_norm_(": {"training/common/optimization.py"},
    "get_scheduler(": {"training/common/optimization.py"},
    "clamp(ratio": {"training/common/losses.py"},
    "log_softmax(": {"inference/logprobs.py",
                     # transformers' logits processor sees a step's scores before its token is chosen
                     "inference/hf_generate.py"},
    "SFTConfig(": {"training/sft/trainer.py"},
    "PeftModel.from_pretrained(": {"models.py"},
    "PlackettLuce(": {"ratings/openskill.py"},
}


def test_one_owner_per_job():
    found: dict[str, set[str]] = {job: set() for job in ONE_OWNER}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).as_posix()
        if "builtin" in path.relative_to(PACKAGE).parts:
            continue
        code = code_of(path.read_text(encoding="utf-8"))
        for job in ONE_OWNER:
            if job in code:
                found[job].add(name)
    wrong = {job: sorted(where - ONE_OWNER[job]) for job, where in found.items() if where - ONE_OWNER[job]}
    assert not wrong, wrong
    assert all(found[job] for job in ONE_OWNER), {job: "written nowhere (a stale rule)" for job in ONE_OWNER
                                                  if not found[job]}


def test_the_owner_finder_reads_code_not_prose():
    assert "torch.optim." in code_of("opt = torch.optim.AdamW(params)  # one\n")
    assert "log_softmax(" in code_of("x = torch.log_softmax(logits / t, dim=-1)\n")
    assert "torch.optim." not in code_of('"""Uses torch.optim.AdamW."""\n# torch.optim.AdamW\nx = 1\n')


def test_a_disk_too_full_for_the_suite_stops_it_in_one_line(tmp_path):
    """conftest's check at the start of a session (CI once ran out of disk at 80 % of the suite)."""
    from conftest import too_little_disk
    assert too_little_disk(tmp_path, needs_mb=1) is None
    line = too_little_disk(tmp_path, needs_mb=2**40)
    assert line.startswith("only ") and f"disk of {tmp_path};" in line and "\n" not in line
