"""Extensions of the documentation site (mkdocs.yml): a griffe extension and mkdocs hooks.

The griffe extension (``SamflowsDocs``) lets mkdocstrings read the packages as they are
written, without changing them:

* ``analysis`` and ``figures`` export their public names lazily (``analysis/_lazy.py``: a
  ``_EXPORTS`` table read by a module ``__getattr__``), which a static reader cannot see. Each
  name of the table becomes an alias of the object in its submodule, so ``::: analysis.boundary``
  documents ``analysis._boundary.boundary`` under its public name.
* The docstrings are written in reStructuredText's inline markup: roles (``:func:`flows.solve```,
  ``:math:`\\alpha```), ``.. math::`` blocks, ``>>>`` doctest blocks and ``::`` literal blocks.
  They are rewritten to Markdown: a role naming a public object becomes a cross-reference to
  its entry, any other role inline code, math is ``$...$`` / ``$$...$$`` for arithmatex, and
  the blocks are fenced code.
* A parameter default written through a private table (``backend: str = _D["backend"]``) is
  shown as its value.

The mkdocs hooks (``on_config``, ``on_page_markdown``) serve the pages:

* A display formula ``$$...$$`` inside a paragraph or a list item (as docs/theory.md writes
  them, and GitHub renders them) is displayed math; arithmatex alone takes ``$$`` only as a
  block of its own.
* A citation ``docs/theory.md §N`` (in the pages and in the docstrings) links to section N.
* A public name written as inline code in a page (```flows.solve```) links to its API entry.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import griffe
from markdown import Extension
from markdown.extensions.toc import slugify
from pymdownx.arithmatex import InlineArithmatexPattern

PACKAGES = ("flows", "analysis", "figures")
ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r":(func|class|meth|attr|data|mod|obj|exc|math):`([^`]+)`")
# The citation form that tests/test_theory.py checks: "docs/theory.md §9, §10".
CITATION = re.compile(r"docs/theory\.md((?:\s*(?:§\d+|,|and|[–-]))+)")
DISPLAY = r"(?:(?<!\\)((?:\\{2})+)(?=\$\$)|(?<!\\)(\$\$)((?:\\.|[^\\$\x02\x03])+?)(?:\$\$))"


def public_names(root: Path) -> dict[str, set[str]]:
    """The public names of each package, read from its ``__init__.py``."""
    names = {}
    for package in PACKAGES:
        init = root / package / "__init__.py"
        found = set(lazy_exports(init))
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                found.update(a.asname or a.name for a in node.names)
        names[package] = {n for n in found if not n.startswith("_")}
    return names


def lazy_exports(path: Path) -> dict[str, str]:
    """The ``_EXPORTS`` table (name -> submodule) of a package ``__init__.py``, or {}."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS":
            return ast.literal_eval(node.value)
    return {}


def theory_sections() -> dict[str, str]:
    """Section number -> heading anchor of docs/theory.md ("## §9 ..." -> "9-l2-sam-..."),
    and "" -> the anchor of its title."""
    text = (ROOT / "docs" / "theory.md").read_text()
    anchors = {m[1]: slugify(m[0][3:], "-") for m in re.finditer(r"^## §(\d+) .*$", text, re.M)}
    anchors[""] = slugify(re.search(r"^# (.*)$", text, re.M)[1], "-")
    return anchors


def link_citations(text: str, sections: dict[str, str]) -> str:
    """Each ``docs/theory.md §N`` of ``text`` as cross-references to the sections."""

    def numbers(match):
        inner = re.sub(r"§(\d+)", lambda m: f"[§{m[1]}][{sections[m[1]]}]", match[1])
        return f"[docs/theory.md][{sections['']}]{inner}"

    return CITATION.sub(numbers, text)


class _DisplayMath(Extension):
    def extendMarkdown(self, md):  # noqa: N802 - Markdown's name
        config = {"generic": True, "tex_inline_wrap": ["\\[", "\\]"]}
        # after code spans (190), before arithmatex's inline $...$ (189.9)
        md.inlinePatterns.register(InlineArithmatexPattern(DISPLAY, config), "display", 189.95)


def on_config(config):
    config.markdown_extensions.append(_DisplayMath())
    return config


def link_names(markdown: str, public: dict[str, set[str]]) -> str:
    """Each public name in inline code (```flows.solve```) outside fences, as a cross-reference."""
    names = {f"{package}.{name}" for package, found in public.items() for name in found}

    def link(match):
        return f"[`{match[1]}`][{match[1]}]" if match[1] in names else match[0]

    out, fenced = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        out.append(line if fenced else re.sub(r"(?<![`\[])`(\w+\.\w+)`(?![`\]])", link, line))
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    markdown = link_names(markdown, public_names(ROOT))
    if page.file.src_uri == "theory.md":
        return markdown
    return link_citations(markdown, theory_sections())


class SamflowsDocs(griffe.Extension):
    """Lazy exports as aliases, and the docstrings' reStructuredText as Markdown."""

    def __init__(self) -> None:
        super().__init__()
        self.public = public_names(ROOT)
        self.sections = theory_sections()

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.name not in PACKAGES:
            return
        exports = lazy_exports(Path(pkg.filepath))
        for name, submodule in exports.items():
            pkg.set_member(name, griffe.Alias(name, f"{pkg.path}.{submodule}.{name}", parent=pkg))
        if exports:
            pkg.exports = sorted(exports)
        for obj in _walk(pkg):
            if obj.docstring is not None:
                text = to_markdown(obj.docstring.value, pkg.name, self.public)
                obj.docstring.value = link_citations(text, self.sections)
            if isinstance(obj, griffe.Function):
                _resolve_defaults(obj)


def _walk(obj, seen=None):
    """Every object defined in ``obj``'s tree (not aliases)."""
    seen = set() if seen is None else seen
    if obj.is_alias or id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    for member in list(obj.members.values()):
        yield from _walk(member, seen)


def _resolve_defaults(func: griffe.Function) -> None:
    for parameter in func.parameters:
        text = str(parameter.default) if parameter.default is not None else ""
        if not re.fullmatch(r"_\w*\[['\"]\w+['\"]\]", text):
            continue
        try:
            module = importlib.import_module(func.module.path)
            value = eval(text, vars(module))  # noqa: S307 - a name and a key, from our source
        except Exception:  # noqa: BLE001 - keep the expression as written
            continue
        if value is None or isinstance(value, str | int | float | bool):
            parameter.default = repr(value)


def _reference(kind: str, target: str, package: str, public: dict[str, set[str]]) -> str:
    """Markdown for the role ``:kind:`target```: a cross-reference, or inline code."""
    short = target.startswith("~")
    target = target.lstrip("~").removesuffix("()")
    shown = target.rsplit(".", 1)[-1] if short else target
    parts = target.split(".")
    if parts[0] in public:
        top, rest = parts[0], parts[1:]
    else:
        top, rest = package, parts
    if kind == "mod" and not rest and top in public:
        return f"[`{shown}`][{top}]"
    if rest and rest[0] in public[top]:
        return f"[`{shown}`][{top}.{rest[0]}]"
    return f"`{shown}`"


def _inline(line: str, package: str, public: dict[str, set[str]]) -> str:
    def replace(match):
        kind, text = match.groups()
        if kind == "math":
            return f"${text.strip()}$"
        return _reference(kind, text, package, public)

    return ROLE.sub(replace, line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block(lines: list[str], start: int, indent: int) -> int:
    """The end of the block indented deeper than ``indent`` that starts at ``start``."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def to_markdown(text: str, package: str, public: dict[str, set[str]]) -> str:
    """A docstring's reStructuredText markup as Markdown (see the module docstring)."""
    lines, out, i = text.splitlines(), [], 0

    def fence(opening: str, body: list[str], closing: str, pad: str) -> None:
        if out and out[-1].strip():
            out.append("")
        out.extend([pad + opening, *body, pad + closing, ""])

    while i < len(lines):
        line = lines[i]
        stripped, pad = line.strip(), line[: _indent(line)]
        if stripped == ".. math::" or stripped.endswith("::") and not stripped.startswith(">>>"):
            end = _block(lines, i + 1, _indent(line))
            body = [s for s in lines[i + 1 : end] if s.strip()]
            deeper = min((_indent(s) for s in body), default=0)
            body = [pad + s[deeper:] for s in lines[i + 1 : end]]
            if stripped == ".. math::":
                fence("$$", [s for s in body if s.strip()], "$$", pad)
            else:
                if stripped != "::":
                    out.append(_inline(line.rstrip()[:-1], package, public))
                fence("```text", body, "```", pad)
            i = end
        elif stripped.startswith(">>>"):
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            fence("```pycon", lines[i:end], "```", pad)
            i = end
        else:
            out.append(_inline(line, package, public))
            i += 1
    return "\n".join(out).rstrip()
