"""The ``buildtile`` command: check, build, new, inspect, doctor, explain, sanitize."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from buildtile import __version__
from buildtile.diagnostics import Diagnostic, render, render_all
from buildtile.errors import BuildtileError, CompileError
from buildtile.sanitize import add_parser as sanitize_parser
from buildtile.stages import STAGE_NAMES

DESCRIPTION = "Build-time checks, compilation and inspection of a Python package's GPU kernels."
#: the exit status of a command whose output pipe closed, as a shell reports one killed by SIGPIPE (git's)
EXIT_BROKEN_PIPE = 128 + 13
#: characters that make an argument a pattern the shell left as it was: it matched nothing
GLOB_CHARS = frozenset("*?[")


def use_color(stream) -> bool:
    """Colour on a terminal: ``NO_COLOR`` (any value) turns it off, ``FORCE_COLOR`` on, as
    no-color.org and most tools read them."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def report(err: BuildtileError) -> None:
    """An error, on stderr, rendered as the diagnostics are."""
    color = use_color(sys.stderr)
    if isinstance(err, CompileError):
        print(render_all(err.diagnostics, color=color), file=sys.stderr)
    else:
        print(render(Diagnostic(err.code, err.message, None, help=err.help or ""), color=color), file=sys.stderr)


def _verbosity(args) -> int:
    return args.verbose - args.quiet


def _quiet_log(message: str) -> None:
    """``-q``: a build's progress lines are dropped."""


def cmd_check(args) -> int:
    from buildtile.check import check_file, check_project

    path = Path(args.path)
    if path.is_dir():
        found, diags = check_project(path)
    elif path.suffix == ".py" and path.is_file():
        found, diags = check_file(path, Path.cwd())
    else:
        what = "does not exist" if not path.exists() else "is neither a project folder nor a Python file"
        raise BuildtileError(f"{path} {what}", code="BT0010",
                             help="give a folder with a pyproject.toml, or one kernel module (a .py file)")
    if diags:
        print(render_all(diags, color=use_color(sys.stderr)), file=sys.stderr)
        return 1
    if _verbosity(args) > 0 and path.is_dir():
        from buildtile.compiler import discover
        from buildtile.config import load_project

        for source in discover(load_project(path)):   # static: parses, imports nothing
            print(f"  {source.module}.{source.name}  [{source.kind}]  {source.display_file}:{source.node.lineno}")
    if _verbosity(args) >= 0:
        print(f"checked {found} kernel{'s' if found != 1 else ''}: no errors")
    return 0


def cmd_build(args) -> int:
    """Compile in place, next to the package's sources (for development and editable installs)."""
    from buildtile.config import load_project
    from buildtile.hooks.staging import build_c_abi_in_place, install_in_place, stage_kernels, staging_dir
    from buildtile.stages import STAGES_DIR, parse_stages

    emit = parse_stages(args.emit.split(","))
    overrides = {"buildtile.jobs": str(args.jobs)} if args.jobs is not None else None
    _check_project_folder(Path(args.path))
    project = load_project(args.path, config_settings=overrides)
    verbosity = _verbosity(args)
    # -q: no progress; -v: a line per job, also on a terminal (a log that is not `print` gets no bar)
    log = _quiet_log if verbosity < 0 else _verbose_log if verbosity > 0 else print
    staged = stage_kernels(project, log=log, emit=emit)
    target = install_in_place(project, staged)
    build_c_abi_in_place(project, staged, log=log)
    if verbosity < 0:
        return 0
    print(f"compiled {len(staged.manifest['kernels'])} kernels for {', '.join(staged.manifest['targets'])} "
          f"into {target}")
    if emit:
        print(f"wrote {', '.join(s.name for s in emit)} of every kernel into {staging_dir(project) / STAGES_DIR}")
    return 0


def _verbose_log(message: str) -> None:
    print(message, flush=True)


def _check_project_folder(path: Path) -> None:
    if not path.exists():
        raise BuildtileError(f"{path} does not exist", code="BT0010", help="give the folder of a project")
    if not path.is_dir():
        raise BuildtileError(f"{path} is not a folder", code="BT0010",
                             help="give the folder that holds the project's pyproject.toml")


def cmd_new(args) -> int:
    from buildtile.scaffold import new_project

    root = new_project(args.name, Path(args.dir))
    # a bare name is a package on the index to pip: the path must look like one
    shown = str(root) if root.is_absolute() or str(root).startswith(".") else f".{os.sep}{root}"
    print(f"created {shown}\n  pip install --no-build-isolation {shown}   # compiles its kernels\n"
          f"  buildtile check {shown}")
    return 0


def cmd_inspect(args) -> int:
    from buildtile.inspect import describe, show_stage

    if args.stage is not None:
        print(show_stage(args.target, args.stage, args.path or ".", target=args.gpu_target))
        return 0
    if args.path is not None or args.gpu_target is not None:
        raise BuildtileError("`buildtile inspect` takes a PATH and --target only with --stage", code="BT0010",
                             help="buildtile inspect --stage ptx KERNEL [--target sm_90] [PATH]")
    target = args.target
    if GLOB_CHARS & set(target) and not Path(target).exists():
        raise BuildtileError(f"no file matches `{target}`", code="BT0620",
                             help="build the wheel first (`python -m build` or `pip wheel .`), or give a "
                                  "package folder or an importable package")
    try:
        text = describe(target, as_json=args.json)
    except ModuleNotFoundError:   # a dotted name whose parent package is not importable
        raise BuildtileError(f"`{target}` is not a wheel, a package folder or an importable package",
                             code="BT0620") from None
    print(text)
    return 0


def cmd_doctor(args) -> int:
    from buildtile.doctor import run_doctor

    return run_doctor(verbose=_verbosity(args) > 0)


def cmd_explain(args) -> int:
    from buildtile.explain import explain

    text, status = explain(args.code)
    print(text, end="", file=sys.stdout if status == 0 else sys.stderr)
    return status


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parser, and its ``inspect`` subparser (which reads its line mixed, see :func:`main`)."""
    # -v/-q go before or after the command: the subcommands' copies leave the main one's value alone
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="more output (repeatable)")
    output.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS,
                        help="less output: errors only")
    parser = argparse.ArgumentParser(
        prog="buildtile", description=DESCRIPTION,
        epilog="Run `buildtile COMMAND --help` for a command's options, `buildtile explain BT0499` for an "
               "error code. NO_COLOR turns colour off, FORCE_COLOR on.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more output (repeatable)")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="less output: errors only")
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("check", parents=[output], help="run every build-time check without compiling",
                       description="Run every build-time check of a project's kernels (or of one kernel module) "
                                   "without compiling anything.")
    p.add_argument("path", nargs="?", default=".", help="a project folder or a kernel module (default: here)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("build", parents=[output], help="compile a project's kernels in place",
                       description="Compile a project's kernels next to its sources (for development and "
                                   "editable installs); a wheel build does the same through pip.")
    p.add_argument("path", nargs="?", default=".", help="the project folder (default: here)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="kernels x targets compiled at once (default: BUILDTILE_JOBS, else one per core)")
    p.add_argument("--emit", default="", metavar="STAGES",
                   help=f"also write these stages of every kernel into build/buildtile/stages "
                        f"(comma-separated: {', '.join(STAGE_NAMES)})")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("new", parents=[output],
                       help="create a project with kernels, a Python and a C++ host, and tests",
                       description="Create a project with a SIMT and a Tile kernel, a Python and a C++ host, "
                                   "and tests, ready to build.")
    p.add_argument("name")
    p.add_argument("--dir", default=".", help="where to create it (default: here)")
    p.set_defaults(func=cmd_new)
    p = inspect = sub.add_parser(
        "inspect", parents=[output],
        help="list the kernels, targets and sizes of a wheel or package; or, with --stage, print one stage "
             "of one kernel",
        description="List the kernels, targets and image sizes of a wheel, a package folder or an installed "
                    "package; or, with --stage, compile one kernel from a project's source and print one stage.")
    p.add_argument("target", metavar="WHEEL|PACKAGE|KERNEL")
    p.add_argument("path", nargs="?", default=None, help="with --stage: the project (default: here)")
    p.add_argument("--json", action="store_true", help="the manifest and file sizes, as JSON")
    p.add_argument("--stage", choices=STAGE_NAMES, default=None,
                   help="compile KERNEL from the project's source and print this stage")
    p.add_argument("--target", dest="gpu_target", default=None, metavar="SM",
                   help="with --stage ptx: the GPU target (default: the project's oldest)")
    p.set_defaults(func=cmd_inspect)
    p = sub.add_parser("doctor", parents=[output],
                       help="check every tool and library buildtile uses: LLVM, nvJitLink, libdevice, "
                            "the C toolchain, the GPU",
                       description="Check every tool and library buildtile uses, say where each was found, "
                                   "and how to fix what is missing. Exits 1 when a build cannot work.")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("explain", parents=[output], help="explain an error code, e.g. BT0499",
                       description="Explain an error code: what it means, an example, and how to fix it.")
    p.add_argument("code")
    p.set_defaults(func=cmd_explain)
    sanitize_parser(sub)
    return parser, inspect


def version_text() -> str:
    """``buildtile --version``: buildtile's version (the runtime ships inside it)."""
    return f"buildtile {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser, inspect = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unparsed = parser.parse_known_args(argv)
    if unparsed and args.command == "inspect":
        # `inspect --stage ptx KERNEL --target sm_90 PATH`: argparse takes positionals split by an
        # option only when it reads the line mixed, which a parser with subcommands cannot
        inspect.set_defaults(verbose=args.verbose, quiet=args.quiet)
        args = inspect.parse_intermixed_args(argv[argv.index("inspect") + 1:])
    elif unparsed:
        parser.parse_args(argv)   # the usual message for what nothing takes
    try:
        status = args.func(args)
        sys.stdout.flush()   # a closed pipe shows here, not in the interpreter's exit
        return status
    except BuildtileError as err:
        report(err)
        return 1
    except BrokenPipeError:
        # the reader went away (`buildtile inspect ... | head -1`): stop quietly, as git does, and
        # keep the interpreter's final flush from failing on the closed pipe
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 128 + 2
    except OSError as exc:
        # a folder where a file is expected, a permission, a full disk: the path and the reason
        where = f"{exc.filename}: " if exc.filename else ""
        report(BuildtileError(f"{where}{exc.strerror or exc}", code="BT0010"))
        return 1


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):   # stdout is no file (captured): nothing will flush to a pipe
        pass


if __name__ == "__main__":
    sys.exit(main())
