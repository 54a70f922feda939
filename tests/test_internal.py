"""flows.internal, analysis.internal, figures.internal: the shared plumbing's one home.

Read from the source with :mod:`ast`: every name an ``internal`` module exports exists and is
used by a package built on it, and no module of ``analysis``, ``figures`` or ``experiments``
imports another package's private module (``flows._validate``, ``analysis._lazy``, ...); no
module of ``flows`` imports a package built on it; the command lines' one parser
(:mod:`samflows_cli`) imports no package and no JAX.
"""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("flows", "analysis", "figures", "experiments")
#: The packages whose modules may use the shared plumbing: each ``internal`` module's users.
USERS = {
    "flows.internal": ("analysis", "figures", "experiments"),
    "analysis.internal": ("figures", "experiments"),
    "figures.internal": ("experiments",),
}


def _sources(*where):
    for w in where:
        path = ROOT / w
        yield from [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def foreign_private_imports(source: str, own: str) -> list[str]:
    """The other packages' private modules (or private names) that ``source`` reaches: imports
    ``from flows._x import ...``, ``import flows._x``, ``from flows import _x`` and the
    attribute ``flows._x``, for ``flows``/``analysis``/``figures``/``experiments`` but ``own``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in PACKAGES and top != own:
                names = [node.module + "." + a.name for a in node.names]
                found += [node.module] if _private(node.module) else []
                found += [n for n in names if _private(n) and not _private(node.module)]
        elif isinstance(node, ast.Import):
            found += [
                a.name
                for a in node.names
                if a.name.split(".")[0] in PACKAGES and a.name.split(".")[0] != own
                if _private(a.name)
            ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in PACKAGES and node.value.id != own and _private(node.attr):
                found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_scan_finds_each_kind_of_private_import():
    source = (
        "from flows._validate import as_array\n"
        "import analysis._lazy\n"
        "from figures import _style\n"
        "import flows\n"
        "x = flows._config.configure\n"
        "from flows.internal import as_array\n"  # the shared home: allowed
        "from ._problem import check_mu\n"  # its own package: allowed
        "y = flows.__version__\n"  # a dunder is not private
    )
    assert foreign_private_imports(source, own="experiments") == [
        "flows._validate", "analysis._lazy", "figures._style", "flows._config",
    ]  # fmt: skip
    assert foreign_private_imports("from analysis._lazy import x\n", own="analysis") == []


@pytest.mark.parametrize("package", ["analysis", "figures", "experiments"])
def test_no_package_imports_another_packages_private_module(package):
    found = {
        str(path.relative_to(ROOT)): bad
        for path in _sources(package)
        if (bad := foreign_private_imports(path.read_text(encoding="utf-8"), own=package))
    }
    assert found == {}


def _imported_tops(source: str) -> set[str]:
    """The top-level names of the absolute imports of ``source``."""
    tops = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
    return tops


def test_flows_imports_no_package_built_on_it():
    """The layers run one way: no module of flows (``python -m flows`` included) imports
    analysis, figures or experiments."""
    found = {
        str(path.relative_to(ROOT)): sorted(up)
        for path in _sources("flows")
        if (up := _imported_tops(path.read_text(encoding="utf-8")) & set(PACKAGES[1:]))
    }
    assert found == {}


def test_the_parser_imports_no_package():
    source = (ROOT / "samflows_cli.py").read_text(encoding="utf-8")
    assert _imported_tops(source) & {*PACKAGES, "jax", "numpy"} == set()


def _used_names(module: str, users) -> set[str]:
    """Names that the sources of ``users`` take from ``module`` (``from module import n`` or
    ``module.n``)."""
    used = set()
    for path in _sources(*users):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == module:
                used |= {a.name for a in node.names}
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == module:
                used.add(node.attr)
    return used


@pytest.mark.parametrize("module", sorted(USERS))
def test_an_internal_module_exports_exactly_the_existing_names_its_users_take(module):
    mod = importlib.import_module(module)
    exported = set(mod.__all__)
    assert exported == set(dir(mod)) & exported  # every exported name is listed by dir()
    missing = sorted(n for n in exported if not hasattr(mod, n))
    assert missing == []
    used = _used_names(module, USERS[module])
    assert used - exported == set()  # a user takes nothing the module does not export
    assert exported - used == set()  # and the module exports nothing no user takes


def test_the_command_line_names_come_without_jax():
    script = (
        "import sys\n"
        "from samflows_cli import ArgumentParser, run_command\n"
        "from analysis.internal import lazy_exports\n"
        "assert 'jax' not in sys.modules and 'flows' not in sys.modules, 'heavy import'\n"
        "from analysis.internal import check_mu\n"
        "print(check_mu([1.0, 2.0]).tolist(), 'jax' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "[1.0, 2.0] True"
