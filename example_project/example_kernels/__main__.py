"""``python -m example_kernels``: run every kernel once and check it against NumPy.

Every kernel of the package's manifest runs -- each specialisation of a Tile
kernel too -- through its check in ``example_kernels/checks.py``, at ragged
sizes; a kernel without a check fails the run. Without a GPU the kernels run
on buildtile's CPU emulator when the full buildtile is installed (``--cpu``
asks for it; a few blocks or tiles each), else it says so and lists the
compiled kernels (targets and image sizes, from the package manifest).
``--cmake-prefix``, ``--cmake-dir``, ``--include-dir`` and ``--library``
print where a C/C++ host finds these kernels (see cpp/).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from buildtile.interop.abi import spell_type

PACKAGE = "example_kernels"
C_HOST_FLAGS = ("--cmake-prefix", "--cmake-dir", "--include-dir", "--library")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg.split("=", 1)[0] in C_HOST_FLAGS for arg in argv):
        try:
            from buildtile.interop.host_cli import package_main
        except ImportError as exc:
            print(f"this buildtile cannot describe a C/C++ interface: {exc}", file=sys.stderr)
            return 2
        return package_main(PACKAGE, argv)

    parser = argparse.ArgumentParser(
        prog=f"python -m {PACKAGE}",
        description="Run each kernel of example_kernels on random inputs and compare it with NumPy. "
                    f"For the C/C++ interface: {', '.join(C_HOST_FLAGS)}.",
    )
    parser.add_argument("--list", action="store_true", help="only list the compiled kernels")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--cpu", action="store_true",
                        help="run on buildtile's CPU emulator (BUILDTILE_DEVICE=cpu) instead of a GPU")
    parser.add_argument("--only", nargs="+", metavar="KERNEL",
                        help="check only these kernels (module.kernel within the package, e.g. ops.vecadd)")
    args = parser.parse_args(argv)
    if args.cpu:
        os.environ["BUILDTILE_DEVICE"] = "cpu"

    from buildtile.errors import BuildtileError

    try:
        manifest, manifest_dir = _manifest()
    except BuildtileError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.list:
        _list_kernels(manifest, manifest_dir)
        return 0
    from example_kernels.checks import manifest_entries, run_checks

    unknown = sorted(set(args.only or ()) - {name for name, _ in manifest_entries(manifest)})
    if unknown:
        print(f"--only: the package has no kernel {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2

    from buildtile.runtime import cuda_available

    usable, description = cuda_available()
    if not usable and _emulator_installed():
        print(f"no CUDA GPU found ({description}): running on buildtile's CPU emulator")
        os.environ["BUILDTILE_DEVICE"] = "cpu"
        from buildtile.runtime.driver import set_driver

        set_driver(None)   # the next launch takes the emulator's driver
        usable, description = cuda_available()
    if not usable:
        print(f"no CUDA GPU found: {description}")
        print("nothing was run; the package carries these compiled kernels:")
        _list_kernels(manifest, manifest_dir)
        return 0
    print(f"running on {description}")
    small = os.environ.get("BUILDTILE_DEVICE") == "cpu"   # the emulator is slow: a few blocks each
    only = set(args.only) if args.only else None
    return 1 if run_checks(manifest, PACKAGE, seed=args.seed, small=small, only=only) else 0


def _emulator_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("buildtile.emulate") is not None


# ----------------------------------------------------------------------------- listing

def _manifest() -> tuple[dict, Path]:
    from buildtile.interop import manifest as manifest_format
    from buildtile.runtime.package import find_manifest

    path = find_manifest(f"{PACKAGE}.ops")
    return manifest_format.load(path), path.parent


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "missing"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def _list_kernels(manifest: dict, manifest_dir: Path) -> None:
    print(f"{manifest.get('package', PACKAGE)}: built by buildtile {manifest.get('buildtile_version', '?')}, "
          f"ABI {manifest.get('abi_version')}, targets {', '.join(manifest.get('targets', []))}"
          f"{', PTX ' + manifest['ptx_target'] if manifest.get('ptx_target') else ''}, "
          f"checks={manifest.get('checks', '?')}")
    for kernel in manifest.get("kernels", []):
        params = ", ".join(f"{p['name']}: {spell_type(p['kind'], p['dtype'], p.get('rank', 1))}"
                           for p in kernel.get("params", []))
        block = (kernel.get("contract") or {}).get("block")
        launch = ("one block per tile" if "tile" in kernel else
                  f"block={tuple(block)}" if block else "no contract: unsafe_launch only")
        print(f"  {kernel['module']}.{kernel['name']}({params})  {launch}")
        for spec in kernel.get("tile", {}).get("specializations", [kernel]):
            dtypes = f", dtypes {spec['dtypes']}" if spec.get("dtypes") else ""
            shapes = f"tile shapes {spec['tile_shapes']}{dtypes}: " if "tile_shapes" in spec else ""
            print(f"      {shapes}{_images(spec.get('artifacts') or {}, manifest_dir)}")


def _images(artifacts: dict, manifest_dir: Path) -> str:
    images = []
    for key, artifact in sorted(artifacts.items()):
        label = f"PTX {artifact.get('target', '')}".strip() if artifact.get("kind") == "ptx" else f"{key} cubin"
        images.append(f"{label} {_size(manifest_dir / artifact['path'])}")
    return " | ".join(images) if images else "no images"


if __name__ == "__main__":
    raise SystemExit(main())
