"""The import rules of docs/design.md ("The import rules"), read from the
source: no module imports one that imports it back, and zoo.layers and
zoo.recipes stay below zoo/."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folder -> the import name it installs as (pyproject's package-dir mapping).
PACKAGES = {"zoo": "zoo", "layers": "zoo.layers", "recipes": "zoo.recipes"}


def module_files():
    """{module name: path} of every module of the import package `zoo`."""
    modules = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def imported_modules(path, modules):
    """The modules of `modules` that the file imports, at module level or in
    a function (a lazy import still makes a cycle when it runs)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from zoo.bench import report` imports the submodule when there is one.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name if name in modules else node.module for name in names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph():
    modules = module_files()
    return {name: imported_modules(path, modules) - {name} for name, path in modules.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_and_recipes_import_nothing_of_zoo_above_them():
    allowed = {"zoo.layers": ("zoo.layers",), "zoo.recipes": ("zoo.layers", "zoo.recipes")}
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for package, below in allowed.items()
        if module == package or module.startswith(package + ".")
        for target in targets
        if not target.startswith(below)
    ]
    assert wrong == []
