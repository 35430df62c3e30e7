"""The layers hold: data flows one way (config -> cluster -> workload + faults -> run directory ->
verifier -> results -> report), so no module imports from a layer above its own, no modules import
each other in a circle, and project imports sit at the top of a file, where a reader sees them.
A project import inside a function is allowed only where it defers a heavy optional dependency
(pyspark, a JVM, a browser driver), and then says so: ``# local: <why>`` on its line or the one
above. The graph is read from the source (every ``import kchaos...`` and ``from kchaos... import``,
wherever it sits), so a planted upward import or cycle fails here whatever the runtime path. A circle
only under ``if TYPE_CHECKING:`` is a circle too: it is never executed, but each side still needs the
other to be understood."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: lowest first: a module may import its own layer and those below
LAYERS = ("kchaos", "protocol", "runtime", "clusters", "workloads", "faults", "verifier", "reports", "harness", "ci", "cli")
RANK = {name: i for i, name in enumerate(LAYERS)}
#: the layers that are sub-packages of the root package (kchaos.<layer> in kchaos/<layer>/)
INNER = ("protocol", "runtime")
#: where each layer's modules are: the foundation is the root package's own modules; the inner layers
#: are its sub-packages; every other layer is a top-level folder (kchaos.<layer>, pyproject's package-dir)
FOLDERS = {"kchaos": Path("kchaos"), **{layer: Path("kchaos", layer) if layer in INNER else Path(layer)
                                        for layer in LAYERS[1:]}}
#: the top-level folders a planted copy of the tree needs
TOP = ("kchaos", *(layer for layer in LAYERS[1:] if layer not in INNER))


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["kchaos", *parts]) if parts[0] != "kchaos" else ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "kchaos"


#: the client workers' sources: standalone programs run in their own interpreter (the Python ones in
#: a virtualenv of their own, workloads/native_clients.py), not modules of the project
STANDALONE = ("workloads", "clients")


def project_files() -> list[Path]:
    """Every module of the layers (ROOT is read when called: a planted copy has its own)."""
    files = [p for p in (ROOT / "kchaos").glob("*.py")]
    for layer in LAYERS[1:]:
        files += sorted(p for p in (ROOT / FOLDERS[layer]).rglob("*.py")
                        if p.relative_to(ROOT).parts[:2] != STANDALONE)
    return sorted(files)


def code_files() -> list[Path]:
    """The project's modules and the benchmarks: the code a rule about the project's own code reads
    (tests are left out: they build run directories and name fault kinds on purpose)."""
    return [*project_files(), *sorted((ROOT / "bench").rglob("*.py"))]


class Import:
    def __init__(self, source: str, target: str, line: int, local: bool, justified: bool, typing_only: bool):
        self.source, self.target, self.line, self.local, self.justified = source, target, line, local, justified
        #: under ``if TYPE_CHECKING:``: never executed, but a circle of meaning all the same, so cycles count it
        self.typing_only = typing_only


def imports_of(path: Path, known: set[str]) -> list[Import]:
    """The project modules ``path`` imports (a ``from X import name`` naming a submodule counts as
    that submodule), each with whether it sits inside a function and whether a comment justifies it."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rsplit(".", 1)[0]
    local_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    typing_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, ast.If) and "TYPE_CHECKING" in ast.unparse(f.test)
                    for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        comment = " ".join(lines[max(0, node.lineno - 2): node.end_lineno or node.lineno])
        for target in targets:
            if target.split(".")[0] == "kchaos" and target != source:
                found.append(Import(source, target, node.lineno, id(node) in local_nodes, "# local:" in comment,
                                    id(node) in typing_nodes))
    return found


def graph() -> tuple[dict[str, list[Import]], set[str]]:
    return _graph_of(ROOT)


@functools.lru_cache(maxsize=None)
def _graph_of(root: Path) -> tuple[dict[str, list[Import]], set[str]]:
    """Read once per tree: the real one is shared by the tests here, a planted copy has its own root."""
    files = project_files()
    known = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, known) for p in files}, known


def resolved(edges: dict[str, list[Import]], known: set[str]) -> Iterator[tuple[str, Import, str]]:
    """Each edge as (source, import, the module it reaches: a name imported from a module is that module)."""
    for source, imports in sorted(edges.items()):
        for imp in imports:
            yield source, imp, imp.target if imp.target in known else imp.target.rsplit(".", 1)[0]


def upward(edges: dict[str, list[Import]], known: set[str]) -> list[str]:
    out = []
    for source, imp, target in resolved(edges, known):
        if RANK[layer_of(target)] > RANK[layer_of(source)]:
            out.append(f"{source}:{imp.line} imports {imp.target} ({layer_of(source)} -> {layer_of(target)})")
    return out


def cycles(edges: dict[str, list[Import]], known: set[str]) -> list[list[str]]:
    adjacency = {s: sorted({i.target for i in imps if i.target in known and i.target != s})
                 for s, imps in edges.items()}
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in adjacency.get(node, []):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(adjacency):
        if node not in state:
            visit(node)
    return found


#: inside the clusters layer, its rooms, lowest first: the proxies know no cluster, the contract knows
#: no backend, a backend knows the contract and the proxies but no other backend, and the registry
#: (clusters/__init__.py: BACKENDS, create_cluster) knows them all
BACKENDS = ("local", "docker", "external")
ROOM_RANK = {"proxy": 0, "contract": 1, "backend": 2, "registry": 3}


def room_of(module: str) -> str:
    """The room of a module of clusters/ ("" outside it)."""
    parts = module.split(".")
    if parts[:2] != ["kchaos", "clusters"]:
        return ""
    if len(parts) == 2:
        return "registry"
    return "proxy" if parts[2] == "proxy" else "backend" if parts[2] in BACKENDS else "contract"


def rooms_broken(edges: dict[str, list[Import]], known: set[str]) -> list[str]:
    out = []
    for source, imp, target in resolved(edges, known):
        here, there = room_of(source), room_of(target)
        if not here or not there:
            continue
        if ROOM_RANK[there] > ROOM_RANK[here]:
            out.append(f"{source}:{imp.line} imports {imp.target} ({here} -> {there})")
        elif here == there == "backend" and source.split(".")[2] != target.split(".")[2]:
            out.append(f"{source}:{imp.line} imports {imp.target} (one backend -> another)")
    return out


def unjustified_local(edges: dict[str, list[Import]]) -> list[str]:
    return [f"{s}:{i.line} imports {i.target} inside a function" for s, imps in sorted(edges.items())
            for i in imps if i.local and not i.justified]


def test_no_module_imports_from_a_layer_above_its_own():
    edges, known = graph()
    assert upward(edges, known) == []


def test_no_modules_import_each_other_in_a_circle():
    edges, known = graph()
    assert cycles(edges, known) == []


def test_the_rooms_of_clusters_hold():
    edges, known = graph()
    assert rooms_broken(edges, known) == []


def test_project_imports_sit_at_the_top_of_a_file_unless_a_comment_says_why():
    edges, _ = graph()
    assert unjustified_local(edges) == []


def test_every_module_of_the_foundation_folder_is_in_a_layer():
    """A sub-package of kchaos/ that no layer names would vanish from the graph: fail instead."""
    inner = [FOLDERS[layer] for layer in INNER]
    stray = [str(p.relative_to(ROOT)) for p in (ROOT / "kchaos").rglob("*.py")
             if p.parent != ROOT / "kchaos" and not any(p.relative_to(ROOT).is_relative_to(f) for f in inner)]
    assert stray == []


#: what a planted import looks like to each finder: (file, text appended, the finder that must see it)
PLANTS = [
    ("clusters/spec.py", "from kchaos.harness.run import execute_run\n", upward),
    # its package's __init__ imports it back
    ("clusters/spec.py", "import kchaos.clusters\n", cycles),
    # the runtime knows no cluster; the protocol imports the foundation only; the foundation no layer
    ("kchaos/runtime/processes.py", "from kchaos.clusters.base import Cluster\n", upward),
    ("kchaos/protocol/wire.py", "from kchaos.runtime.ports import HOST\n", upward),
    ("kchaos/files.py", "from kchaos.protocol.wire import Reader\n", upward),
    # the rooms of clusters: a backend imports no other, the proxies import no contract module
    ("clusters/docker/cluster.py", "from kchaos.clusters.local.cluster import LocalJvmCluster\n", rooms_broken),
    ("clusters/proxy/rules.py", "from kchaos.clusters.spec import ClusterSpec\n", rooms_broken),
    # a circle only under TYPE_CHECKING: the schedule imports the scheduled fault
    ("faults/scheduled.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from kchaos.faults.schedule import generate_schedule\n", cycles),
]


@pytest.mark.parametrize("target, planted, finds", PLANTS)
def test_the_checks_find_a_planted_upward_import_a_planted_cycle_and_a_broken_room(tmp_path, monkeypatch, target, planted, finds):
    """One module of a copy of the tree given an import that breaks a rule; the real tree is left alone."""
    import shutil

    tree = tmp_path / "tree"
    for name in TOP:
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.toml", "*.java",
                                                                              "templates", "examples", "*.xsd"))
    path = tree / target
    path.write_text(path.read_text() + "\n" + planted)
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tree)
    edges, known = graph()
    assert finds(edges, known) != []


def test_every_module_imports_without_side_effects(monkeypatch):
    """Importing a module runs no program: the wheel check imports every module, and a
    ``__main__`` that ran the CLI on import exited there (CI failed on it, exit 3)."""
    import importlib

    monkeypatch.setattr("sys.argv", ["pytest-import-check"])
    imported = [importlib.import_module(module_name(path)).__name__ for path in project_files()]
    assert "kchaos.cli.__main__" in imported and len(imported) > 50
