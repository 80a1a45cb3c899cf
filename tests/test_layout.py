"""The package's shape: imports flow one way (no cycle between playpen's modules, counting
imports inside functions too), and no module grows past ~400 lines without saying why."""
import ast
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


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """playpen modules that `name` imports anywhere in its file (the longest known prefix)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
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


STAGES = ["playpen.envs", "playpen.inference", "playpen.rollouts", "playpen.data", "playpen.training.common.lifecycle",
          "playpen.cli"]


def test_the_data_flows_one_way():
    """Lower layers never import higher ones (registry -> envs -> inference -> rollouts ->
    data -> training -> evaluation -> cli)."""
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
    assert [stage for stage in STAGES if stage not in known] == []
    assert STAGES.index("playpen.inference") < STAGES.index("playpen.rollouts")


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
