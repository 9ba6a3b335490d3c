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


def build_package(sources: dict[str, Path], package: str, root: Path, targets: list[str],
                  settings: str = "") -> None:
    """The kernel modules ``sources`` (module name -> source file) built into ``root`` as
    ``<package>.<module>`` for ``targets`` (more ``[tool.buildtile]`` lines in ``settings``)."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

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


@contextlib.contextmanager
def imported_package(package: str, root: Path, modules) -> Iterator[dict[str, ModuleType]]:
    """The ``modules`` of ``package``, built in ``root``, imported; forgotten afterwards."""
    from buildtile.runtime.package import forget_package

    sys.path.insert(0, str(root))
    try:
        yield {m: importlib.import_module(f"{package}.{m}") for m in modules}
    finally:
        sys.path.remove(str(root))
        forget_package(package)
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]


@contextlib.contextmanager
def built_package(sources: dict[str, Path], prefix: str, root: Path, targets: list[str],
                  settings: str = "") -> Iterator[dict[str, ModuleType]]:
    """The kernel modules ``sources`` built into ``root`` as ``<prefix><n>.<module>`` (see
    :func:`build_package`), imported; forgotten afterwards."""
    package = f"{prefix}{next(_ids)}"
    build_package(sources, package, root, targets, settings)
    with imported_package(package, root, sources) as modules:
        yield modules


#: the ``[tool.buildtile]`` lines of a package that opts in to torch custom ops
TORCH_OPS = "\n[tool.buildtile.torch]\nops = true\n"


def built_for_the_emulator(sources: dict[str, Path], prefix: str, root: Path, torch_ops: bool = False):
    """The kernel modules ``sources`` built for sm_90, the emulated device's default (see
    :func:`built_package`)."""
    return built_package(sources, prefix, root, ["sm_90"], TORCH_OPS if torch_ops else "")


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
_builds: list = []   # the open import contexts (closing one forgets its package)
#: the package name of the example modules built for the emulator
EXAMPLES_PACKAGE = "cpuexamples"


def _build_examples(folder: Path) -> Path:
    build_package(EXAMPLES, EXAMPLES_PACKAGE, folder, ["sm_90"], TORCH_OPS)
    return folder


def examples_for_the_emulator() -> dict[str, ModuleType]:
    """Every kernel module of the example project, built once per test run for the emulator (the
    first worker process to ask builds it, the others import that build; one build serves every
    test module that runs them: building is most of the emulated cases' time), by its name within
    the package. Like the example project, the package opts in to torch custom ops."""
    if not _examples:
        import atexit

        from run_dirs import made_once, run_folder

        root = made_once(run_folder("emulated-examples"), _build_examples)
        imported = imported_package(EXAMPLES_PACKAGE, root, EXAMPLES)
        _builds.append(imported)
        _examples.update(imported.__enter__())
        atexit.register(imported.__exit__, None, None, None)
    return _examples


def example_manifest_for_the_emulator() -> tuple[dict, Path]:
    """(the manifest, its path) of :func:`examples_for_the_emulator`'s build: every kernel and
    specialisation of the example project, under the build's package name."""
    import json

    from buildtile.runtime.package import find_manifest

    path = find_manifest(next(iter(examples_for_the_emulator().values())).__name__)
    return json.loads(path.read_text()), path
