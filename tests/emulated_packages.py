"""Kernel packages built here for the CPU emulator, for the device-parametrised GPU test cases.

The GPU tests' correctness cases take a ``device``: ``cuda`` (marked gpu) or ``cpu``, which
runs the same kernels from a copy of their package built in a temporary directory under
another name (so its kernels never share loaded functions with the GPU's) through
:func:`buildtile.emulate.emulated`, on CPU torch tensors."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]
_ids = itertools.count()


@contextlib.contextmanager
def built_package(sources: dict[str, Path], prefix: str, root: Path, targets: list[str],
                  settings: str = "") -> Iterator[dict[str, ModuleType]]:
    """The kernel modules ``sources`` (module name -> source file) built into ``root`` as
    ``<prefix><n>.<module>`` for ``targets`` (more ``[tool.buildtile]`` lines in ``settings``),
    imported; forgotten afterwards."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project
    from buildtile.runtime.package import forget_package

    package = f"{prefix}{next(_ids)}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    for module, source in sources.items():
        shutil.copy(source, root / package / f"{module}.py")
    kernels = ", ".join(f'"{package}.{m}"' for m in sources)
    listed = ", ".join(f'"{t}"' for t in targets)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = [{kernels}]\ntargets = [{listed}]\nptx = false\n{settings}')
    compile_project(load_project(root, env={}), root, log=lambda line: None)
    sys.path.insert(0, str(root))
    try:
        yield {m: importlib.import_module(f"{package}.{m}") for m in sources}
    finally:
        sys.path.remove(str(root))
        forget_package(package)
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]


def built_for_the_emulator(sources: dict[str, Path], prefix: str, root: Path, torch_ops: bool = False):
    """The kernel modules ``sources`` built for sm_90, the emulated device's default (see
    :func:`built_package`)."""
    return built_package(sources, prefix, root, ["sm_90"],
                         "\n[tool.buildtile.torch]\nops = true\n" if torch_ops else "")


def _example_modules() -> dict[str, Path]:
    """Every kernel module the example project lists, by its name within the package."""
    from buildtile.config import load_project
    from buildtile.discovery import resolve_modules

    project = load_project(ROOT / "example_project", env={})
    return {m.name.partition(".")[2]: m.path for m in resolve_modules(project.root, project.settings.kernels)}


EXAMPLES = _example_modules()

#: the largest case (elements) the emulator runs: the default suite's time budget
CPU_MAX_ELEMENTS = 5_000


def _elements(value) -> int:
    """Elements of a size or a shape."""
    total = 1
    for n in (value if isinstance(value, tuple) else (value,)):
        total *= n
    return total


def on_devices(cases: list, cpu_max: int = CPU_MAX_ELEMENTS) -> list:
    """``(device, case...)`` parameters: every case on ``cuda`` (a GPU test) and, on ``cpu`` (the
    emulator, in the default suite), the cases of at most ``cpu_max`` elements. A case is one
    value (a size or a shape) or a list of values whose first is the size or shape."""
    import pytest

    def values(case) -> tuple:
        return tuple(case) if isinstance(case, list) else (case,)

    out = [pytest.param("cuda", *values(c), marks=pytest.mark.gpu) for c in cases]
    out += [pytest.param("cpu", *values(c)) for c in cases if _elements(values(c)[0]) <= cpu_max]
    return out


_examples: dict[str, ModuleType] = {}
_builds: list = []   # the open build contexts (closing one forgets its package)


def examples_for_the_emulator() -> dict[str, ModuleType]:
    """Every kernel module of the example project, built once per test process for the emulator
    (one build serves every test module that runs them: building is most of the emulated cases'
    time), by its name within the package. Like the example project, the package opts in to torch
    custom ops."""
    if not _examples:
        import atexit
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="buildtile_emulated_examples_"))
        build = built_for_the_emulator(EXAMPLES, "cpuexamples", root, torch_ops=True)
        _builds.append(build)
        _examples.update(build.__enter__())
        atexit.register(shutil.rmtree, root, True)
        atexit.register(build.__exit__, None, None, None)   # runs first, while sys.path exists
    return _examples


def example_manifest_for_the_emulator() -> tuple[dict, Path]:
    """(the manifest, its path) of :func:`examples_for_the_emulator`'s build: every kernel and
    specialisation of the example project, under the build's package name."""
    import json

    from buildtile.runtime.package import find_manifest

    path = find_manifest(next(iter(examples_for_the_emulator().values())).__name__)
    return json.loads(path.read_text()), path
