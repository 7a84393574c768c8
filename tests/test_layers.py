"""The tree is the architecture: one folder per layer, lower layers never import higher ones, no import circles,
the pure core free of Flask, gevent and requests, and no module past ~300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "toolproxy"
# Lowest first. A module may import its own layer's modules and any lower layer's, never a higher one.
LAYERS = ("version", "errors", "wire", "dialects", "config", "meaning", "transform", "clients", "upstream", "observe",
          "demo", "routes", "fronts", "doctor", "web", "server", "cli", "__main__")
PURE = ("wire", "dialects", "meaning")
# The stages of a request speak no client's protocol: they make neutral answers and events (transform/turn.py),
# and only a front end (fronts/) encodes them, as bytes of its protocol, in an HTTP response.
NEUTRAL = ("transform", "routes")
PROTOCOL_WRITERS = ("flask", "werkzeug", "toolproxy.wire.sse", "toolproxy.fronts")
IMPURE = ("flask", "werkzeug", "gevent", "requests")
MAX_LINES = 300


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module this one imports, lazily or under TYPE_CHECKING too: a circle is a circle either way."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {name: {other for other in imports_of(path) if other in MODULES and other != name}
         for name, path in MODULES.items()}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # the package itself (`toolproxy`) belongs to no layer


def test_every_module_is_in_a_known_layer():
    assert {layer_of(name) for name in MODULES} - {None} <= set(LAYERS)


def test_lower_layers_never_import_higher_ones():
    wrong = []
    for name, targets in GRAPH.items():
        own = layer_of(name)
        for target in targets:
            theirs = layer_of(target)
            if own and theirs and LAYERS.index(theirs) > LAYERS.index(own):
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_no_import_circles():
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_the_pure_core_does_no_io():
    wrong = [f"{name} imports {other}" for name, path in MODULES.items() if layer_of(name) in PURE
             for other in imports_of(path) if other.split(".")[0] in IMPURE]
    assert wrong == []


def test_the_stages_write_no_protocol():
    wrong = [f"{name} imports {other}" for name, path in MODULES.items() if layer_of(name) in NEUTRAL
             for other in imports_of(path) if other.startswith(PROTOCOL_WRITERS)]
    assert wrong == []


def test_modules_stay_small():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


# The transform log's storage is observe's: the routes and pages use `TransformLog` and the store interface
# (observe/store.py), and no other layer opens a database. The one exception is the start-up check of the database
# URL (server/logcheck.py, `toolproxy check-config`), which asks observe's schema room whether it can be used.
DATABASE_DRIVERS = ("sqlite3", "psycopg", "psycopg_pool")
STORES = ("toolproxy.observe.sqlite_store", "toolproxy.observe.queries", "toolproxy.observe.postgres_store",
          "toolproxy.observe.postgres_queries", "toolproxy.observe.postgres_schema")
URL_CHECK = "toolproxy.observe.postgres_schema"


def opens_a_database(name: str, other: str) -> bool:
    if other.split(".")[0] in DATABASE_DRIVERS:
        return True
    return other.startswith(STORES) and not (other.startswith(URL_CHECK) and layer_of(name) in ("server", "cli"))


def test_only_observe_keeps_the_transform_log():
    wrong = [f"{name} imports {other}" for name, path in MODULES.items() if layer_of(name) != "observe"
             for other in imports_of(path) if opens_a_database(name, other)]
    assert wrong == []
    stores = {name for name in MODULES if name.startswith(STORES)}
    assert {layer_of(name) for name in stores} == {"observe"} and len(stores) == len(STORES)
