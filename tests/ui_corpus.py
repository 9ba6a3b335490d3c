"""The header of a must-fail UI file: ``# expect: CODE line:col [CODE line:col ...]``."""

from __future__ import annotations

import re
from pathlib import Path


def expected(path: Path) -> list[tuple[str, int, int]]:
    """Every diagnostic the file must produce: (code, 1-based line, 1-based column)."""
    header = path.read_text().splitlines()[0]
    assert header.startswith("# expect:"), f"{path.name} lacks its `# expect:` line"
    return [(c, int(l), int(col)) for c, l, col in re.findall(r"(BT\d{4}) (\d+):(\d+)", header)]
