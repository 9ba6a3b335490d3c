"""``buildtile new NAME``: a ready project with kernels, a Python and a C++ host, and tests.

The files are templates beside this module (``template/``), with ``@PKG@``
(the import package) and ``@DIST@`` (the distribution name) filled in.
Dot files are stored without their dot (``gitignore.tmpl``), so packaging
globs and editors treat them as ordinary files.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path

from buildtile.errors import BuildtileError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: templates written as dot files
_DOT_FILES = {"gitignore"}


def new_project(name: str, where: Path) -> Path:
    """Write project ``name`` under ``where``; returns its folder."""
    if not _NAME.fullmatch(name):
        raise BuildtileError(f"`{name}` is not a usable project name", code="BT0010",
                             help="start with a letter; use letters, digits, '-' and '_'")
    package = name.replace("-", "_").lower()
    if keyword.iskeyword(package):
        raise BuildtileError(f"`{package}` is a Python keyword and cannot name a package", code="BT0010")
    root = Path(where) / name
    if root.exists():
        raise BuildtileError(f"{root} already exists", code="BT0010", help="pick another name or remove it")
    template = resources.files(__package__) / "template"
    for src, rel in _walk(template, ""):
        rel = rel.replace("PKG", package)
        if rel.removesuffix(".tmpl") in _DOT_FILES:
            rel = "." + rel
        text = src.read_text().replace("@PKG@", package).replace("@DIST@", name)
        target = root / rel.removesuffix(".tmpl")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def _walk(folder, prefix: str):
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        rel = f"{prefix}{entry.name}"
        if entry.is_dir():
            yield from _walk(entry, rel + "/")
        elif entry.name.endswith(".tmpl"):
            yield entry, rel
