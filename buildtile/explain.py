"""``buildtile explain CODE``: one entry of the error index, rendered for a terminal."""

from __future__ import annotations

import re
import textwrap

from buildtile.codes import CODES, ErrorCode

_CODE = re.compile(r"(?:BT)?(\d{1,4})", re.IGNORECASE)


def normalize(text: str) -> str | None:
    """``BT0499``, ``bt0499``, ``0499`` and ``499`` all name BT0499; None if it is not a code."""
    match = _CODE.fullmatch(text.strip())
    return f"BT{int(match.group(1)):04d}" if match else None


def render(entry: ErrorCode) -> str:
    """The entry as ``rustc --explain`` prints one: title, explanation, then the examples."""
    out = [f"{entry.code}: {entry.title}", "", f"Caught at: {', '.join(entry.stages)}.", "", entry.explanation,
           "", "Erroneous example:", "", _indent(entry.wrong), "", "Corrected:", "", _indent(entry.right)]
    return "\n".join(out) + "\n"


def _indent(code: str) -> str:
    return textwrap.indent(code, "    ", lambda line: True).replace("    \n", "\n").rstrip(" ")


def explain(text: str) -> tuple[str, int]:
    """What ``buildtile explain`` prints and its exit status: 0, or 2 for a code with no entry."""
    code = normalize(text)
    if code is None:
        return f"error: `{text}` is not an error code; codes look like BT0499\n", 2
    entry = CODES.get(code)
    if entry is None:
        return f"error: {code} is not a buildtile error code; known codes: {', '.join(CODES)}\n", 2
    return render(entry), 0
