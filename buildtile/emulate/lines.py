"""Source lines in the IR the emulator runs, so its diagnostics can name them.

The lowering emits no debug locations. While the emulator lowers a kernel
(and only then: a build's IR never has them), every ``stmt_*`` method of the
languages' statement lowerings is wrapped so that each instruction it emits
carries ``!bt.line !N``, ``!N = !{i32 line}`` of the statement's source;
:func:`buildtile.emulate.hostir.host_ir` reads those into its sites and drops
them. The kind is buildtile's own, not ``!dbg``: LLVM would take that for debug
info of an unknown version, warn and strip it wherever it parses the IR. A
lowering that is not found (or renamed) only costs the lines.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import llvmlite.ir as lir

#: the instruction metadata kind that holds an instruction's source line
LINE_KIND = "bt.line"
#: (module, class) of each language's statement lowering: the classes whose ``stmt_*`` are wrapped
LOWERINGS = (("buildtile.backends.simt.lower.stmt", "StatementLowering"),
             ("buildtile.backends.tile.lower", "_Emitter"))

_lock = threading.Lock()


def _with_line(method):
    @functools.wraps(method)
    def lowered(self, s, *args, **kwargs):
        builder = self.b
        line = getattr(s.src, "lineno", None)
        if line is None:
            return method(self, s, *args, **kwargs)
        node = builder.module.add_metadata([lir.Constant(lir.IntType(32), line)])
        saved = builder.__dict__.get("_insert")
        insert = saved or type(builder)._insert.__get__(builder)

        def tagged(instr):   # tagged before the enclosing statements' wrappers see it: the innermost line wins
            instr.metadata.setdefault(LINE_KIND, node)
            insert(instr)

        builder._insert = tagged
        try:
            return method(self, s, *args, **kwargs)
        finally:
            if saved is None:
                del builder._insert
            else:
                builder._insert = saved
    return lowered


@contextmanager
def source_lines() -> Iterator[None]:
    """Within the block, the statement lowerings tag what they emit with source lines."""
    with _lock:
        patched = []
        for module_name, class_name in LOWERINGS:
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError):
                continue
            for name, method in list(vars(cls).items()):
                if name.startswith("stmt_") and callable(method):
                    patched.append((cls, name, method))
                    setattr(cls, name, _with_line(method))
        try:
            yield
        finally:
            for cls, name, method in patched:
                setattr(cls, name, method)
