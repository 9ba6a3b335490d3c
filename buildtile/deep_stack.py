"""Room for deeply nested kernel code.

The typers, the ownership checks and the lowerings walk expressions recursively,
and Python's parser builds ``a + b + ... + z`` as a chain nested as deep as it is
long. A long sum (tens of thousands of terms, as generated code writes) would
overflow Python's default recursion limit, so the compiler's front half runs on a
thread of its own with a large stack and a matching recursion limit.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Callable, TypeVar

from buildtile.backend import KernelSource
from buildtile.diagnostics import Diagnostic, Span

T = TypeVar("T")

#: bytes of stack for the compiler's thread: reserved, not committed, until used
STACK_BYTES = 1 << 30
#: Python frames allowed on that thread (a few KiB of stack each at the most)
RECURSION_LIMIT = 150_000

_on_deep_stack = threading.local()


def deep_stack(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` on a thread with :data:`STACK_BYTES` of stack and :data:`RECURSION_LIMIT`
    (directly, when already on such a thread); its result or exception comes back as is."""

    @functools.wraps(fn)
    def run(*args, **kwargs) -> T:
        if getattr(_on_deep_stack, "active", False):
            return fn(*args, **kwargs)
        outcome: dict = {}

        def body() -> None:
            _on_deep_stack.active = True
            try:
                outcome["value"] = fn(*args, **kwargs)
            except BaseException as exc:   # handed to the caller's thread unchanged
                outcome["error"] = exc

        previous_stack = threading.stack_size(STACK_BYTES)
        previous_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous_limit, RECURSION_LIMIT))
        try:
            worker = threading.Thread(target=body, name="buildtile-compiler", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous_stack)
        try:
            worker.join()
        finally:
            sys.setrecursionlimit(previous_limit)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return run


def too_deep(source: KernelSource) -> Diagnostic:
    """A kernel whose code nests deeper than the compiler's recursion limit (a sum of tens of
    thousands of terms): refused with its location, not a Python traceback."""
    return Diagnostic(
        "BT0200", f"kernel `{source.name}` nests its expressions too deeply to compile",
        Span.of(source.node, source.display_file, source.lines), label="in this kernel",
        help="split the longest expression into a few intermediate variables")
