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


def _every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement: module level, inside functions and under TYPE_CHECKING."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def all_imports(include_functions: bool = True) -> list[tuple[str, str, int]]:
    """(module, imported thresher module, line) for each import of each module (the deepest
    module each import names); with ``include_functions`` also those inside functions and
    under TYPE_CHECKING."""
    modules = set(all_thresher_modules())
    out: list[tuple[str, str, int]] = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        nodes = _every_import(tree) if include_functions else _top_level_imports(tree)
        for node in nodes:
            targets: set[str] = set()
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in modules)
            else:
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        targets.add(sub)
                    elif base in modules:
                        targets.add(base)
            out.extend((name, target, node.lineno) for target in sorted(targets) if target != name)
    return out


def import_graph(include_functions: bool = False) -> dict[str, set[str]]:
    """module -> the thresher modules it imports (module level only unless ``include_functions``)."""
    graph: dict[str, set[str]] = {m: set() for m in all_thresher_modules()}
    for module, target, _ in all_imports(include_functions):
        graph[module].add(target)
    return graph


#: The three layers (docs/architecture.md). A module belongs to the longest prefix listed.
ENGINE, STORAGE, FRONT_END = 1, 2, 3
LAYERS: dict[str, int] = {
    "thresher.errors": ENGINE,
    "thresher._validate": ENGINE,
    "thresher._optional": ENGINE,
    "thresher.randomness": ENGINE,
    "thresher.samplers": ENGINE,
    "thresher.transforms": ENGINE,
    "thresher.loader": ENGINE,
    "thresher.loader.producers": ENGINE,  # the six producers, on one chunk loop (base.ChunkLoop)
    "thresher.loader.pool": ENGINE,  # the worker processes and the pools' schedule
    "thresher.sources.protocol": ENGINE,
    "thresher.sources.range": ENGINE,
    "thresher.sources.in_memory": ENGINE,
    "thresher.sources": STORAGE,
    "thresher.splits": STORAGE,
    "thresher.features": STORAGE,
    "thresher.dataset": FRONT_END,
    "thresher.grain": FRONT_END,
    "thresher.jax": FRONT_END,
    "thresher.forensics": FRONT_END,
    "thresher.display": FRONT_END,
    "thresher.vision": FRONT_END,
    "thresher.demo": FRONT_END,
    "thresher.beam": FRONT_END,
    "thresher.cli": FRONT_END,
    "thresher.__main__": FRONT_END,
    "thresher": FRONT_END,
}
#: Package ``__init__`` modules that re-export their subpackages' public names (``thresher.sources``
#: exports the engine's sources beside the formats): they may import what they re-export.
REEXPORTS = {"thresher", "thresher.sources"}


def layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


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


def test_no_circle_counting_imports_inside_functions() -> None:
    """Imports inside functions and under TYPE_CHECKING count: a circle kept alive by a lazy
    import is still a circle."""
    graph = import_graph(include_functions=True)
    assert "thresher.sources.write.beam" in graph["thresher.sources.write.prepare"]  # a lazy import, seen
    assert find_cycle(graph) is None


def test_every_module_has_a_layer() -> None:
    assert layer("thresher.loader.pool.workers") == ENGINE
    assert layer("thresher.loader.producers.processes") == ENGINE
    assert layer("thresher.sources.range") == ENGINE
    assert layer("thresher.sources.formats.tfds.reader") == STORAGE
    assert layer("thresher.dataset.mix") == FRONT_END


def test_no_import_runs_upward() -> None:
    """engine <- storage <- front ends: no module imports a layer above its own, counting imports
    inside functions."""
    upward = [f"{module} imports {target} (line {line})"
              for module, target, line in all_imports(include_functions=True)
              if module not in REEXPORTS and layer(target) > layer(module)]
    assert upward == []


def test_the_package_root_holds_little() -> None:
    """The root keeps the public names, the errors, the command, the shared checks and the one helper for
    optional imports (``_optional``); every other
    module lives in a room of its layer (``thresher.beam`` is the public path of the Beam writer)."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "_optional.py", "_validate.py", "beam.py", "cli.py", "errors.py"]


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
        timeout=900,  # ~200 modules, each imported first in the same interpreter: ~1 min quiet, 5 on a loaded 2-core machine
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout


def test_earlier_import_paths_give_the_moved_objects() -> None:
    # Paths named in earlier guides keep working after the moves into sources/formats/.
    from thresher import sources
    from thresher.sources.array_record import ArrayRecordSource
    from thresher.sources.formats import tfds as moved
    from thresher.sources.formats.tfds import convert as moved_convert
    from thresher.sources.tfds import TfdsSource
    from thresher.sources.tfds.convert import convert

    assert TfdsSource is moved.TfdsSource and convert is moved_convert.convert
    assert ArrayRecordSource is sources.ArrayRecordSource


def _prints_ok(script: str) -> None:
    """Runs ``script`` in a fresh interpreter; it must print ``ok``."""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=str(PACKAGE.parent))
    assert out.stdout.strip() == "ok", out.stderr


def test_import_thresher_is_light_and_every_public_name_still_resolves() -> None:
    # `import thresher` imports no subpackage (public names load on first use): a worker, the
    # fork server and a script that needs one part import only that part. Every name in
    # __all__, and the subpackages that `import thresher` used to make attributes, resolve.
    script = (
        "import sys, thresher\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('thresher.'))\n"
        "assert loaded == ['thresher._optional', 'thresher.errors'], loaded\n"
        "import thresher.loader.pool.worker_main\n"
        "heavy = [m for m in sys.modules if m.startswith(('thresher.dataset', 'thresher.features', "
        "'thresher.splits', 'thresher.sources.formats.parquet', 'thresher.forensics'))]\n"
        "assert heavy == [], heavy\n"
        "for name in thresher.__all__ + ['dataset', 'display', 'forensics', 'loader', 'randomness']:\n"
        "    assert getattr(thresher, name) is not None, name\n"
        "    assert name in dir(thresher)\n"
        "for name in thresher.sources.__all__:\n"
        "    getattr(thresher.sources, name)\n"
        "print('ok')\n"
    )
    _prints_ok(script)


def test_a_local_array_record_source_leaves_the_byte_range_reader_unimported() -> None:
    # A worker reading local ArrayRecord files imports the source's module when it loads the
    # pipeline (the fork server preloads it): the byte-range reader (http, the chunk cache, the
    # Riegeli parser) is for URLs and reader="ranges" only, and cost every worker's start ~20 ms.
    script = (
        "import os, sys, tempfile\n"
        "from thresher.sources.formats.array_record.source import ArrayRecordSource\n"
        "from thresher.sources.formats.array_record.writer import write_array_record\n"
        "path = os.path.join(tempfile.mkdtemp(), 'x.array_record')\n"
        "write_array_record(path, [b'a', b'b'])\n"
        "src = ArrayRecordSource(path)\n"
        "assert src[1] == b'b'\n"
        "assert 'thresher.sources.remote.reader' not in sys.modules\n"
        "import thresher.sources.remote as remote\n"
        "assert 'thresher.sources.remote.reader' not in sys.modules\n"
        "assert remote.RangeReader.__module__ == 'thresher.sources.remote.reader'\n"
        "assert ArrayRecordSource(path, reader='ranges')[0] == b'a'\n"
        "print('ok')\n"
    )
    _prints_ok(script)
