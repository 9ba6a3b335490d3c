"""Where buildtile's errors leave a build tool: once, as a message, never as a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

Hook = TypeVar("Hook", bound=Callable[..., Any])


def report_buildtile_errors(hook: Hook) -> Hook:
    """Report a :class:`~buildtile.errors.BuildtileError` as its message alone and exit 1.

    Internals raise typed errors and never print; a kernel's rendered
    diagnostics are the whole message. Other exceptions are bugs and keep
    their traceback.
    """

    @functools.wraps(hook)
    def run_hook(*args: Any, **kwargs: Any) -> Any:
        from buildtile.errors import BuildtileError

        try:
            return hook(*args, **kwargs)
        except BuildtileError as exc:
            sys.stdout.flush()  # keep the build log before the error, as the user saw it
            print(f"\n{exc}\n", file=sys.stderr, flush=True)
            raise SystemExit(1) from None

    return run_hook  # type: ignore[return-value]
