"""No import cycles: every module imports alone in a fresh interpreter, and the graph of
module-level imports between thresher's modules has no cycle."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "thresher"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_thresher_modules() -> list[str]:
    return sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: not in functions, not under TYPE_CHECKING."""
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            todo.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(
                node.body
                + node.orelse
                + node.finalbody
                + [s for h in node.handlers for s in h.body]
            )
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the thresher modules its import runs (the deepest module each import names)."""
    modules = set(all_thresher_modules())
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
                continue
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    edges.add(sub)
                elif base in modules:
                    edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_module_level_imports_have_no_cycle() -> None:
    graph = import_graph()
    assert "thresher.loader.engine" in graph["thresher.loader.data_loader"]
    assert find_cycle(graph) is None


def test_keyed_randomness_is_a_leaf() -> None:
    graph = import_graph()
    for module in (m for m in graph if m.startswith("thresher.randomness")):
        assert graph[module] <= {"thresher.errors"} | {
            m for m in graph if m.startswith("thresher.randomness")
        }


_IMPORT_EACH_ALONE = """
import importlib, sys, traceback
failed = []
for module in sys.argv[1:]:
    for name in [m for m in sys.modules if m == "thresher" or m.startswith("thresher.")]:
        del sys.modules[name]  # each module is imported first, before any other thresher module
    try:
        importlib.import_module(module)
    except Exception:
        failed.append(module + ": " + traceback.format_exc(limit=3))
print("\\n".join(failed))
"""


def test_every_module_imports_alone() -> None:
    """Each module imported first in an interpreter that has loaded no thresher module yet
    (one fresh interpreter; third-party modules such as numpy stay loaded between them)."""
    modules = all_thresher_modules()
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_ALONE, *modules],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout
