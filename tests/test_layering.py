"""The layers stay apart: api/ stands alone and has no import circle; service/ and the console never
import each other (the console reaches the service only through the client); the service borrows
nothing of the client but to seed demo data; the packages of service/ form no circle."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_PACKAGES = ("pages", "components")
# What a module of api/ must never need: our other layers, and the console's framework.
REFUSED_FOR_API = ("service", "pages", "components", "streamlit")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_modules(path: Path) -> Iterator[str]:
    """Every module a file imports, anywhere in it (TYPE_CHECKING blocks and functions included).

    `from package import name` yields `package.name` when that is a module of ours, else `package`.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*candidate.split(".")) / "__init__.py"
                ).exists()
                yield candidate if is_module else node.module


def top_level(module: str) -> str:
    return module.split(".", 1)[0]


def crossings(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in modules_of(package)
        for module in imported_modules(path)
        if top_level(module) in forbidden
    ]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph (as the path that closes it), or None when it has none."""
    finished: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in finished:
            return None
        path.append(node)
        for target in sorted(graph.get(node, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        finished.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle:
            return cycle
    return None


def api_import_graph() -> dict[str, set[str]]:
    return {
        module_name(path): {module for module in imported_modules(path) if top_level(module) == "api"}
        - {module_name(path)}
        for path in modules_of("api")
    }


def test_every_api_module_imports_without_service_or_console() -> None:
    # `api/__main__.py` runs the command line when imported; its imports are those of api.cli.
    modules = [module_name(path) for path in modules_of("api") if path.name != "__main__.py"]
    script = textwrap.dedent(
        f"""
        import importlib, importlib.abc, sys

        REFUSED = {REFUSED_FOR_API!r}

        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".", 1)[0] in REFUSED:
                    raise ImportError(f"api/ must not import {{name}}")
                return None

        sys.meta_path.insert(0, Refuse())
        for module in {modules!r}:
            importlib.import_module(module)
        leaked = sorted(name for name in sys.modules if name.split(".", 1)[0] in REFUSED)
        assert not leaked, leaked
        print(len({modules!r}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(modules) > 10


def test_service_never_imports_the_console() -> None:
    assert crossings("service", CONSOLE_PACKAGES) == []


def test_pages_never_import_the_service() -> None:
    assert crossings("pages", ("service",)) == []


def client_imports(path: Path) -> list[str]:
    """Where a file takes the client itself (not a wire model or a constant) from api/."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (
            node.module == "api.client"
            or (node.module == "api" and any(a.name == "OrgdeckClient" for a in node.names))
        )
    ]


def test_the_service_uses_no_client_but_to_seed_demo_data() -> None:
    # Demo seeding and the console's embedded mode drive the API as any client does; nothing that
    # serves a request may borrow the client's code (its header rules are in api/headers.py).
    allowed = {"demo.py", "embedded.py"}
    found = [
        hit for path in modules_of("service") if path.name not in allowed for hit in client_imports(path)
    ]
    assert found == []
    assert client_imports(
        ROOT / "service" / "runtime" / "embedded.py"
    )  # the check sees an import where there is one


def service_package_graph() -> dict[str, set[str]]:
    """Which package (or top-level module) of service/ imports which: service.http, service.app…"""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for path in modules_of("service"):
        if "migrations" in path.parts:
            continue
        source = package(module_name(path))
        targets = {package(module) for module in imported_modules(path) if top_level(module) == "service"}
        graph.setdefault(source, set()).update(targets - {source, "service"})
    return graph


def test_no_package_of_the_service_reaches_back_up() -> None:
    # An area never imports one above it: the change requests sit above the areas they apply, the
    # deployments above agents, tools and environments; a lower area announces a hook instead.
    graph = service_package_graph()
    assert "service.deployments" in graph["service.changes"] and "service.http" in graph["service.agents"]
    assert find_cycle(graph) is None


def test_api_has_no_import_cycle() -> None:
    graph = api_import_graph()
    assert "api.client" in graph["api.cli"] and "api.agents" in graph["api.client"]
    assert find_cycle(graph) is None


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_the_cycle_finder_finds_circles(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle
