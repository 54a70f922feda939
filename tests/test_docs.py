"""The documentation site's sources agree with the code: the API pages document every public
name, every page is in the site's navigation, and the README's links resolve.

The build itself (``mkdocs build --strict``, in .ci/run) renders the pages, runs their
examples and fails on a broken reference; these checks need no documentation packages."""

import importlib
import pathlib
import re
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _public(package):
    """The package's public names: ``__all__``, else its names without a leading underscore
    that are not submodules (``flows.internal``, shared plumbing, is an attribute of
    :mod:`flows` once imported, not a name of its API)."""
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not isinstance(v, types.ModuleType)
        ]
    return set(names)


@pytest.mark.parametrize("package", ["flows", "analysis", "figures"])
def test_api_page_documents_every_public_name_once(package):
    page = (DOCS / "api" / f"{package}.md").read_text()
    entries = re.findall(rf"^::: {package}\.(\w+)$", page, re.M)
    assert len(entries) == len(set(entries)), "an entry is listed twice"
    public = _public(package)
    assert public - set(entries) == set(), "public names missing from the API page"
    assert set(entries) - public == set(), "the API page documents names that are not public"


def test_every_page_is_in_the_navigation():
    config = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", config, re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs pages"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_ci_builds_the_docs_strictly_before_the_tests():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    build = next(i for i, line in enumerate(lines) if "mkdocs build --strict" in line)
    tests = next(i for i, line in enumerate(lines) if line.endswith("&& pytest"))
    assert build < tests


def test_the_benchmarks_table_names_every_script_and_each_has_a_section():
    """benchmarks/README.md's table of workloads names every benchmark script (all but the shared
    ``common.py``), and each workload of the table has a section of its own."""
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    table = readme.split("## Workloads", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\w+) \| ([^|]+) \|", table, re.M)  # (number, command)
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")} - {"common.py"}
    named = {name for _, command in rows for name in re.findall(r"benchmarks/(\w+\.py)", command)}
    assert scripts - named == set(), "scripts missing from the table"
    sections = set(re.findall(r"^## (\w+)\. ", readme, re.M))
    assert {number for number, _ in rows} - sections == set(), "workloads without a section"
