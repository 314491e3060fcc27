"""Imports run downward only, between the layers docs/architecture.md names.

The scan reads every module of the product (function-local and TYPE_CHECKING imports included, since they are
dependencies all the same) and fails on an import from a lower layer into a higher one. Modules of one layer may
import each other. Every module must belong to a layer, so a new package has to be placed before it can land.
Allowed exceptions are listed here, each with its reason, as tests/test_single_write_path.py lists its writers.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("compozy", "memory", "inspector")

# Highest first. A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("surfaces", (
        "memory.management", "memory.api", "memory.tools", "memory.cli", "inspector",
        # One declaration per verb, from which the CLI, MCP and REST surfaces are generated.
        "memory.verbs",
        # The django-q2 task cluster's entry point: it calls background tasks as a surface calls a service.
        "memory.background",
        # Project wiring: settings, URL routing, WSGI, the gunicorn config, the `compozy` console script.
        "compozy.cli", "compozy.command", "compozy.serving", "compozy.urls", "compozy.wsgi", "compozy.settings",
        "compozy.gunicorn_conf", "compozy.gunicorn_worker", "compozy.logfilters", "compozy.hook_client",
        "memory.apps",
    )),
    # bootstrap (migrate a fresh home, replay unapplied decisions) is the service every process calls first.
    ("services", ("memory.services", "memory.bootstrap")),
    ("engines", ("memory.recall", "memory.sessions", "memory.controller", "memory.dreaming", "memory.extractor",
                 "memory.importers")),
    # What the engines stand on: the derived catalog, the files on disk, the tables (models and their
    # migrations), the LLM providers behind a protocol, and configuration.
    # compozy.home: the home's directories and private file modes, beside the configuration that names the home.
    ("storage", ("memory.catalog", "memory.store", "memory.models", "memory.migrations", "memory.providers",
                 "compozy.config", "compozy.home")),
    ("domain", ("memory.domain",)),
]
RANK = {name: len(LAYERS) - index for index, (name, _prefixes) in enumerate(LAYERS)}
# The packages themselves (their __init__ only, never what is below them: a new package must be placed above).
PACKAGE_ROOTS = {"compozy": "surfaces", "memory": "surfaces", "inspector": "surfaces"}

# (importing module, imported module) -> why the upward import is allowed. Empty: there are none.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# A surface parses, calls one service and renders: below the services it may use only the shared shapes and
# configuration, never the engines or storage directly (an event, say, is recorded through a service).
SURFACE_MAY_SKIP_TO = ("memory.domain", "compozy.config", "compozy.home")

# The domain is pure Python: nothing that needs Django configured.
FRAMEWORK_ROOTS = {"django", "rest_framework", "drf_spectacular", "django_q", "whitenoise", "gunicorn"}


def layer_of(module: str) -> str | None:
    if module in PACKAGE_ROOTS:
        return PACKAGE_ROOTS[module]
    best: tuple[int, str] | None = None
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), name)
    return best[1] if best else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the source, relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from memory.services import events` imports the module memory.services.events.
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return found


def upward_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    own = layer_of(module)
    found = []
    for line, imported in imports(module, source, is_package=is_package):
        if imported.split(".")[0] not in PACKAGES:
            continue
        theirs = layer_of(imported)
        if own is None or theirs is None:
            continue  # reported by the every-module-has-a-layer test
        if RANK[theirs] > RANK[own] and not any(
            module == importer and (imported == target or imported.startswith(target + "."))
            for importer, target in ALLOWED_UPWARD
        ):
            found.append(f"{module}:{line} ({own}) imports {imported} ({theirs})")
    return found


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def test_every_module_belongs_to_a_layer():
    unplaced = [module_name(path) for path in sources() if layer_of(module_name(path)) is None]
    assert unplaced == []


def test_no_module_imports_from_a_higher_layer():
    offending = [v for path in sources()
                 for v in upward_imports(module_name(path), path.read_text(), is_package=path.name == "__init__.py")]
    assert offending == [], "upward imports:\n" + "\n".join(offending)


def test_the_domain_imports_no_django():
    offending = [f"{module_name(path)}:{line} imports {imported}"
                 for path in sources() if layer_of(module_name(path)) == "domain"
                 for line, imported in imports(module_name(path), path.read_text(),
                                               is_package=path.name == "__init__.py")
                 if imported.split(".")[0] in FRAMEWORK_ROOTS or layer_of(imported) not in (None, "domain")]
    assert offending == [], "\n".join(offending)


def skipping_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    if layer_of(module) != "surfaces":
        return []
    return [f"{module}:{line} imports {imported} ({layer_of(imported)})"
            for line, imported in imports(module, source, is_package=is_package)
            if imported.split(".")[0] in PACKAGES and layer_of(imported) not in ("surfaces", "services")
            and not any(imported == allowed or imported.startswith(allowed + ".") for allowed in SURFACE_MAY_SKIP_TO)]


def test_surfaces_reach_the_engines_and_storage_only_through_the_services():
    offending = [v for path in sources()
                 for v in skipping_imports(module_name(path), path.read_text(), is_package=path.name == "__init__.py")]
    assert offending == [], "\n".join(offending)


def test_the_skip_scan_would_catch_a_surface_recording_an_event_through_the_controller():
    probe = "def f():\n    from memory.controller.events import event_record\n"
    assert skipping_imports("memory.tools.probe", probe) == [
        "memory.tools.probe:2 imports memory.controller.events.event_record (engines)"]
    assert skipping_imports("memory.tools.probe", "from memory.services.events import event_list\n") == []


def test_every_allowed_exception_is_still_needed():
    needed = {(module_name(path), target) for path in sources() for (importer, target) in ALLOWED_UPWARD
              if module_name(path) == importer
              and any(imported == target or imported.startswith(target + ".")
                      for _line, imported in imports(importer, path.read_text()))}
    assert needed == set(ALLOWED_UPWARD)


def test_the_scan_would_catch_an_upward_import_even_inside_a_function():
    probe = (
        "from __future__ import annotations\n"
        "from memory.domain.models import ScopeRef\n"  # downward: fine
        "from .rules import decide\n"  # a peer: fine
        "def f():\n"
        "    from memory.services.views import decision_summary\n"  # upward, function-local
        "    from ..services import context\n"  # upward, relative
        "    import inspector.views\n"  # upward, plain import
    )
    found = upward_imports("memory.controller.probe", probe)
    assert [entry.split(" imports ")[1] for entry in found] == [
        "memory.services.views.decision_summary (services)",
        "memory.services.context (services)",
        "inspector.views (surfaces)",
    ]


def test_a_new_package_has_no_layer_until_it_is_placed():
    assert layer_of("memory.newpackage.module") is None
    assert layer_of("compozy.newmodule") is None
    assert layer_of("memory") == "surfaces" and layer_of("memory.services.writes") == "services"


def test_the_domain_scan_would_catch_django():
    assert [imported for _line, imported in imports("memory.domain.probe", "import django.db\n")] == ["django.db"]
    assert layer_of("memory.domain.probe") == "domain"


# ----- no cycles between surfaces ------------------------------------------------------------------------------

# The surface packages. One may import another only one way round: with a cycle (the verbs importing the CLI's
# renderer while the CLI imports the verbs) neither can be read, tested or replaced without the other.
SURFACE_PACKAGES = ("memory.verbs", "memory.cli", "memory.api", "memory.tools", "inspector", "memory.background",
                    "memory.management", "compozy")
# compozy/ holds two surfaces: the product's commands (the command base every app's commands build on, the console
# script, the hook client) and the project's wiring, which names every app (settings, the root URLconf, WSGI,
# gunicorn). Django loads the wiring by its dotted name and no module imports it, so it is a package of its own
# here: the URLconf's 404 handler reaching into inspector.views is not the inspector's command reaching back.
WIRING = ("compozy.settings", "compozy.urls", "compozy.wsgi", "compozy.gunicorn_conf", "compozy.gunicorn_worker")
# The declarations every surface is generated from (the CLI's flags, the MCP schemas, the OpenAPI routes).
DECLARATIONS = "memory.verbs"


def surface_package(module: str) -> str | None:
    if layer_of(module) != "surfaces":
        return None
    if any(module == wiring or module.startswith(wiring + ".") for wiring in WIRING):
        return "compozy (wiring)"
    found = [p for p in SURFACE_PACKAGES if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


def surface_edges(modules: dict[str, str], packages: frozenset[str] = frozenset()) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the imports that make the edge, over module name -> source
    (`packages`: the modules that are a package's __init__, whose relative imports start one level lower)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, source in modules.items():
        own = surface_package(module)
        if own is None:
            continue
        for line, imported in imports(module, source, is_package=module in packages):
            theirs = surface_package(imported)
            if theirs is not None and theirs != own:
                edges.setdefault((own, theirs), []).append(f"{module}:{line} imports {imported}")
    return edges


def surface_cycles(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Each pair of surface packages that reach each other (directly or through others), with the imports of the
    edges on the way: one line per package that closes a cycle."""
    graph: dict[str, set[str]] = {}
    for own, theirs in edges:
        graph.setdefault(own, set()).add(theirs)

    def path(start: str, goal: str) -> list[str] | None:
        seen, queue = {start}, [[start]]
        while queue:
            walk = queue.pop(0)
            for step in sorted(graph.get(walk[-1], ())):
                if step == goal:
                    return [*walk, step]
                if step not in seen:
                    seen.add(step)
                    queue.append([*walk, step])
        return None

    found = []
    for own, theirs in sorted(edges):
        back = path(theirs, own)
        if back is not None:
            hops = [own, *back]
            found.append(" -> ".join(hops) + ": " + "; ".join(
                edges[(a, b)][0] for a, b in zip(hops, hops[1:], strict=False)))
    return found


def product_edges() -> dict[tuple[str, str], list[str]]:
    paths = sources()
    return surface_edges({module_name(path): path.read_text() for path in paths},
                         frozenset(module_name(path) for path in paths if path.name == "__init__.py"))


def test_no_two_surface_packages_import_each_other():
    cycles = surface_cycles(product_edges())
    assert cycles == [], "cycles between surface packages:\n" + "\n".join(cycles)


def test_the_verbs_import_no_surface():
    """The declarations every surface is generated from depend on none of them (their human views included)."""
    edges = product_edges()
    offending = [line for (own, _theirs), lines in sorted(edges.items()) if own == DECLARATIONS for line in lines]
    assert offending == [], "\n".join(offending)


def test_the_cycle_scan_would_catch_the_verbs_importing_the_cli_through_a_function():
    modules = {
        "memory.cli.command": "from memory.verbs import Verb\n",
        "memory.verbs.memory": "def human(d):\n    from memory.cli.render import table\n",
        "memory.api.routes": "from memory.verbs import all_verbs\n",
        "memory.tools.server": "from compozy.cli import version\n",
    }
    edges = surface_edges(modules)
    assert surface_cycles(edges) == [
        "memory.cli -> memory.verbs -> memory.cli: memory.cli.command:1 imports memory.verbs.Verb; "
        "memory.verbs.memory:2 imports memory.cli.render.table",
        "memory.verbs -> memory.cli -> memory.verbs: memory.verbs.memory:2 imports memory.cli.render.table; "
        "memory.cli.command:1 imports memory.verbs.Verb",
    ]
    # A longer way round is a cycle too: the CLI's commands built on compozy, compozy printing through the CLI.
    longer = surface_edges({"memory.cli.command": "from compozy.command import ProductCommand\n",
                            "compozy.command": "from memory.management.commands import memory\n",
                            "memory.management.commands.memory": "from memory.cli.command import VerbCommand\n"})
    assert len(surface_cycles(longer)) == 3
    # The wiring naming every app is not a cycle with the inspector's command built on the command base.
    wiring = surface_edges({"compozy.urls": "from inspector.views import page_not_found\n",
                            "inspector.management.commands.inspector": "from compozy.command import ProductCommand\n"})
    assert surface_cycles(wiring) == []


def imports_of_test_modules(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """Imports of a test module (tests.<...>.test_<name>, or a name from one) in the source, relative ones
    resolved."""
    return [f"{module}:{line} imports {imported}" for line, imported in imports(module, source, is_package=is_package)
            if imported.startswith("tests.") and any(part.startswith("test_") for part in imported.split(".")[1:])]


def test_no_test_module_imports_from_another_test_module():
    """What tests share lives in helper modules (tests/helpers.py, tests/<area>/helpers.py, conftest fixtures):
    importing a test module runs it, ties one test file's meaning to another's and collects its tests twice over."""
    offending = [found for path in sorted((REPO / "tests").rglob("*.py"))
                 for found in imports_of_test_modules(module_name(path), path.read_text(),
                                                      is_package=path.name == "__init__.py")]
    assert offending == [], "\n".join(offending)


def test_the_test_module_scan_would_catch_a_relative_import_of_a_sibling_test_module():
    source = ("from .test_pages import page_text\nfrom tests.inspector.helpers import signed_in_client\n"
              "from tests.recall import test_search\n")
    assert imports_of_test_modules("tests.inspector.test_defaults", source) == [
        "tests.inspector.test_defaults:1 imports tests.inspector.test_pages.page_text",
        "tests.inspector.test_defaults:3 imports tests.recall.test_search",
    ]
