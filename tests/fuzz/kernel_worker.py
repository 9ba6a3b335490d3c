"""The kernel fuzzer's worker: reads one JSON case per line (``{"source", "name"}``) and answers
one JSON outcome per line (``{"kind", "detail"}``), so an LLVM abort kills this process only."""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from pathlib import Path

from buildtile.backend import CompileOptions
from buildtile.check import check_file
from buildtile.deep_stack import deep_stack
from buildtile.discovery import KernelModule, find_kernels
from buildtile.errors import BuildtileError
from buildtile.plugins import backends
from buildtile.toolchain.ptx import llvm_to_ptx

TARGET = "sm_80"


@deep_stack
def compile_all(path: Path, root: Path) -> None:
    """analyze -> entries (LLVM IR) -> PTX of every kernel in ``path``, on the compiler's deep stack
    as a build runs them."""
    registry = backends()
    options = CompileOptions()
    for src in find_kernels(KernelModule(path.stem, path), registry, root):
        impl = registry[src.kind].impl
        kernel = impl.analyze(src, options)
        for entry in impl.entries(kernel, options):
            refusals = impl.check_target(kernel, entry, TARGET, options)
            if refusals:
                continue
            if entry.llvm_ir is None:
                impl.ptx(kernel, entry, TARGET, options)
            else:
                llvm_to_ptx(entry.llvm_ir, TARGET, options.opt_level)


def innermost(exc: BaseException) -> str:
    """``Type: message`` and the innermost frame inside buildtile: what tells errors apart."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "buildtile" in f.filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} ({frames[-1].name})" if frames else ""
    return f"{type(exc).__name__}{where}"


def run_case(source: str, name: str, folder: Path) -> dict:
    path = folder / f"{name}.py"
    path.write_text(source)
    try:
        _, diags = check_file(path, folder)
        if diags:
            bad = [d for d in diags if not (d.code.startswith("BT") and len(d.code) == 6)]
            if bad:
                return {"kind": "internal", "detail": f"diagnostic without a BT code: {bad[0].code}"}
            return {"kind": "refused", "detail": " ".join(sorted({d.code for d in diags}))}
        compile_all(path, folder)
    except BuildtileError as err:
        return {"kind": "refused", "detail": err.code}
    except RecursionError as exc:
        return {"kind": "internal", "detail": innermost(exc)}
    except Exception as exc:  # the point of the fuzzer: anything else is a bug
        return {"kind": "internal", "detail": innermost(exc)}
    return {"kind": "ok", "detail": ""}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="buildtile-fuzz-") as tmp:
        for line in sys.stdin:
            case = json.loads(line)
            print(json.dumps(run_case(case["source"], case["name"], Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
