"""The package's layering: no import loop, a storage layer free of LangGraph, small modules."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import objstore_saver

PACKAGE = Path(objstore_saver.__file__).parent
#: A module past this many lines holds several concerns: split it.
MAX_MODULE_LINES = 600
#: A function past this many lines does several things: split it.
MAX_FUNCTION_LINES = 150


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("objstore_saver", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports anywhere, inside functions included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
    found.discard(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in graph[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return out


def test_no_import_loop_even_through_imports_inside_functions() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert sum(len(deps) for deps in graph.values()) > 100, "the import graph was not read"
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_storage_layer_imports_without_langgraph() -> None:
    code = (
        "import sys, objstore_saver.storage, objstore_saver.storage.urls, objstore_saver.errors; "
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('lang')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_package_imports_neither_its_test_kits_nor_pytest() -> None:
    code = (
        "import sys, objstore_saver, objstore_saver.storage, objstore_saver.config; "
        "[getattr(objstore_saver, n) for n in objstore_saver.__all__]; "
        "print(sorted(m for m in sys.modules if m.startswith(('objstore_saver.testing', 'pytest', "
        "'_pytest'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
    modules = _modules()
    importers = {
        name: sorted(dep for dep in _imports(name, path, modules) if ".testing" in dep)
        for name, path in modules.items()
        if not name.startswith("objstore_saver.testing")
    }
    assert {name: deps for name, deps in importers.items() if deps} == {}


def test_the_public_names_still_load() -> None:
    for name in objstore_saver.__all__:
        assert getattr(objstore_saver, name) is not None, name


def test_no_module_is_past_the_size_that_holds_one_concern() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert len(sizes) > 50
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_is_past_the_size_that_does_one_thing() -> None:
    long = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}"] = lines
    assert long == {}


def test_no_two_folders_import_each_other() -> None:
    from bench.probes.code_size import folder_loops

    assert folder_loops() == []


def test_the_folder_loop_finder_finds_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.probes import code_size

    for folder, other in (("a", "b"), ("b", "a")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(f"from objstore_saver.{other} import m\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "m.py").write_text("from objstore_saver.a import m\n")
    monkeypatch.setattr(code_size, "PACKAGE", tmp_path)
    assert code_size.folder_loops() == [["a", "b"]]


def test_the_line_count_tells_code_from_docstrings_comments_and_blanks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.probes import code_size

    (tmp_path / "m.py").write_text(
        '"""Module doc,\n\nin three lines."""\n\n# a comment\n'
        'def f() -> int:\n    """One line."""\n    return 1  # trailing, still code\n'
    )
    monkeypatch.setattr(code_size, "PACKAGE", tmp_path)
    assert code_size.line_kinds() == {
        "total": 8,
        "blank": 1,
        "comment": 1,
        "docstring": 4,
        "code": 2,
    }


def test_every_folder_map_names_its_modules() -> None:
    """Each folder's ``__init__`` docstring is the map a newcomer reads: it names every
    module and subfolder of the folder."""
    unnamed = {}
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        rooms = [m.stem for m in folder.glob("*.py") if m.stem != "__init__"]
        rooms += [d.name for d in folder.iterdir() if (d / "__init__.py").exists()]
        missing = [r for r in rooms if not re.search(rf"\b{re.escape(r)}\b", doc)]
        if missing and folder != PACKAGE:
            unnamed[str(folder.relative_to(PACKAGE))] = sorted(missing)
    assert unnamed == {}


def test_the_http_layer_knows_nothing_of_s3() -> None:
    modules = _modules()
    http = {
        name: path
        for name, path in modules.items()
        if name.startswith("objstore_saver.storage.http")
    }
    assert len(http) >= 5, "the HTTP layer's modules were not found"
    reaches = {
        name: sorted(
            dep
            for dep in _imports(name, path, modules)
            if not dep.startswith("objstore_saver.storage.http")
        )
        for name, path in http.items()
    }
    assert {name: deps for name, deps in reaches.items() if deps} == {}
