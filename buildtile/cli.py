"""The ``buildtile`` command: check, build, inspect, doctor, explain, sanitize."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from buildtile.diagnostics import render_all
from buildtile.errors import BuildtileError
from buildtile.sanitize import add_parser as sanitize_parser
from buildtile.stages import STAGE_NAMES


def cmd_check(args) -> int:
    from buildtile.check import check_file, check_project

    path = Path(args.path)
    if path.is_dir():
        found, diags = check_project(path)
    elif path.suffix == ".py" and path.is_file():
        found, diags = check_file(path, Path.cwd())
    else:
        raise BuildtileError(f"{path} is neither a project folder nor a Python file", code="BT0010")
    if diags:
        print(render_all(diags), file=sys.stderr)
        return 1
    print(f"checked {found} kernel{'s' if found != 1 else ''}: no errors")
    return 0


def cmd_build(args) -> int:
    """Compile in place, next to the package's sources (for development and editable installs)."""
    from buildtile.config import load_project
    from buildtile.hooks.staging import build_c_abi_in_place, install_in_place, stage_kernels, staging_dir

    from buildtile.stages import STAGES_DIR, parse_stages

    emit = parse_stages(args.emit.split(","))
    overrides = {"buildtile.jobs": str(args.jobs)} if args.jobs is not None else None
    project = load_project(args.path, config_settings=overrides)
    staged = stage_kernels(project, log=print, emit=emit)
    target = install_in_place(project, staged)
    build_c_abi_in_place(project, staged, log=print)
    print(f"compiled {len(staged.manifest['kernels'])} kernels for {', '.join(staged.manifest['targets'])} "
          f"into {target}")
    if emit:
        print(f"wrote {', '.join(s.name for s in emit)} of every kernel into {staging_dir(project) / STAGES_DIR}")
    return 0


def cmd_new(args) -> int:
    from buildtile.scaffold import new_project

    root = new_project(args.name, Path(args.dir))
    print(f"created {root}\n  pip install --no-build-isolation {root}   # compiles its kernels\n"
          f"  buildtile check {root}")
    return 0


def cmd_inspect(args) -> int:
    from buildtile.inspect import describe, show_stage

    if args.stage is not None:
        print(show_stage(args.target, args.stage, args.path or ".", target=args.gpu_target))
        return 0
    if args.path is not None or args.gpu_target is not None:
        raise BuildtileError("`buildtile inspect` takes a PATH and --target only with --stage", code="BT0010",
                             help="buildtile inspect --stage ptx KERNEL [--target sm_90] [PATH]")
    print(describe(args.target, as_json=args.json))
    return 0


def cmd_doctor(args) -> int:
    from buildtile.doctor import run_doctor

    return run_doctor()


def cmd_explain(args) -> int:
    from buildtile.explain import explain

    text, status = explain(args.code)
    print(text, end="", file=sys.stdout if status == 0 else sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="buildtile", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="run every build-time check without compiling")
    p.add_argument("path", nargs="?", default=".")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("build", help="compile a project's kernels in place")
    p.add_argument("path", nargs="?", default=".")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="kernels x targets compiled at once (default: BUILDTILE_JOBS, else one per core)")
    p.add_argument("--emit", default="", metavar="STAGES",
                   help=f"also write these stages of every kernel into build/buildtile/stages "
                        f"(comma-separated: {', '.join(STAGE_NAMES)})")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("new", help="create a project with kernels, a Python and a C++ host, and tests")
    p.add_argument("name")
    p.add_argument("--dir", default=".", help="where to create it (default: here)")
    p.set_defaults(func=cmd_new)
    p = inspect = sub.add_parser("inspect", help="list the kernels, targets and sizes of a wheel or package; "
                                       "or, with --stage, print one stage of one kernel")
    p.add_argument("target", metavar="WHEEL|PACKAGE|KERNEL")
    p.add_argument("path", nargs="?", default=None, help="with --stage: the project (default: here)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--stage", choices=STAGE_NAMES, default=None,
                   help="compile KERNEL from the project's source and print this stage")
    p.add_argument("--target", dest="gpu_target", default=None, metavar="SM",
                   help="with --stage ptx: the GPU target (default: the project's oldest)")
    p.set_defaults(func=cmd_inspect)
    p = sub.add_parser("doctor", help="check the GPU, driver, nvJitLink, LLVM and C toolchain")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("explain", help="explain an error code, e.g. BT0499")
    p.add_argument("code")
    p.set_defaults(func=cmd_explain)
    sanitize_parser(sub)
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unparsed = parser.parse_known_args(argv)
    if unparsed and args.command == "inspect":
        # `inspect --stage ptx KERNEL --target sm_90 PATH`: argparse takes positionals split by an
        # option only when it reads the line mixed, which a parser with subcommands cannot
        args = inspect.parse_intermixed_args(argv[argv.index("inspect") + 1:])
    elif unparsed:
        parser.parse_args(argv)   # the usual message for what nothing takes
    try:
        return args.func(args)
    except BuildtileError as err:
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
