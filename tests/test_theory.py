"""docs/theory.md is the one theory document: every citation of it names a section it has, no
source cites a file outside the repository or an issue number, and every function it names
exists."""

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
THEORY = (ROOT / "docs" / "theory.md").read_text()
SOURCES = ("flows", "analysis", "figures", "experiments")
CITING = (*SOURCES, "benchmarks", "tests")

# "docs/theory.md §3", "docs/theory.md §9, §10", "docs/theory.md §10 and §11", "§8–§10".
CITATION = re.compile(r"docs/theory\.md((?:\s*(?:§\d+|,|and|[–-]))+)")


def _files(folders, suffixes=(".py", ".md")):
    """The files under ``folders`` with one of ``suffixes`` (None: every file), caches aside."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                if suffixes is None or path.suffix in suffixes:
                    yield path


def _sections():
    return {int(n) for n in re.findall(r"^## §(\d+) ", THEORY, re.M)}


def _cited(text):
    """Every section number cited as docs/theory.md §N in ``text``, with its line."""
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for number in re.findall(r"§(\d+)", match.group(1)):
            yield line, int(number)


def test_sections_are_numbered_one_to_n():
    numbers = [int(n) for n in re.findall(r"^## §(\d+) ", THEORY, re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert len(numbers) >= 10


def test_cited_reads_every_form():
    text = "docs/theory.md §3; (docs/theory.md §9, §10) docs/theory.md §10 and §11, §4–§5."
    assert [n for _, n in _cited(text)] == [3, 9, 10, 10, 11, 4, 5]


def test_every_citation_names_an_existing_section():
    sections = _sections()
    bad, count = [], 0
    pages = [p for p in _files(["docs"], (".md",)) if p.name != "theory.md"]
    for path in [*_files(CITING), ROOT / "README.md", *pages]:
        if path == pathlib.Path(__file__):
            continue
        for line, number in _cited(path.read_text()):
            count += 1
            if number not in sections:
                bad.append(f"{path.relative_to(ROOT)}:{line}: §{number}")
    assert not bad, f"sections missing from docs/theory.md: {bad}"
    assert count >= 50  # the docstrings, tests and docs pages do cite it


@pytest.mark.parametrize(
    "pattern",
    [r"science\.md", r"\.\./shared", r"(?i)issue #?\d+"],
    ids=["science.md", "../shared", "issue N"],
)
def test_sources_cite_nothing_outside_the_repository(pattern):
    bad = []
    for path in _files(SOURCES, suffixes=None):
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if re.search(pattern, line):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bad, "\n".join(bad)


def _resolve(dotted):
    """Import the longest importable module prefix of ``dotted``, then getattr the rest."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for name in parts[k:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


NAMES = sorted(set(re.findall(r"`((?:flows|analysis|figures)(?:\.\w+)+)`", THEORY)))


def test_theory_names_functions():
    assert len(NAMES) >= 40
    assert "flows.solve" in NAMES and "analysis.critical_alpha" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_name_in_the_theory_resolves(name):
    _resolve(name)
