"""``buildtile sanitize [--tool T] -- CMD ...``: run a program under NVIDIA's compute-sanitizer.

The program's kernels (a Python host, a C/C++ host, a test run) are checked by one of
the sanitizer's tools:

- ``memcheck`` (the default): out-of-bounds and misaligned device memory accesses, and
  API calls that pass device memory the wrong way (``--check-api-memory-access``);
- ``racecheck``: shared-memory data races between threads of a block;
- ``synccheck``: invalid use of ``__syncthreads``/warp synchronisation;
- ``initcheck``: reads of device global memory that nothing wrote.

The settings suit buildtile's modules: every process the command starts is followed
(a test runner or ``python -m`` may start more), the connection waits for a Python
interpreter's start-up, and the sanitizer's report goes to its own log, which is
relayed to stderr at the end with one summary line per tool, so the program's output
stays its own. API errors are not reported: buildtile's runtime checks every driver
status itself and raises BT0700 for a failed one.

Exit status: 1 when the tool reported errors; otherwise the program's own status.
The sanitizer is ``--sanitizer PATH``, else ``compute-sanitizer`` on PATH, under
``CUDA_HOME``/``CUDA_PATH``, in ``/usr/local/cuda*/``, or from the
``nvidia-cuda-sanitizer-api`` wheel.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import BuildtileError

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
BINARY = "compute-sanitizer"

#: seconds the sanitizer waits for a started process to connect (a Python start-up is slow)
LAUNCH_TIMEOUT_S = 120

#: the status the sanitizer exits with when its tool reported errors
ERROR_EXITCODE = 86

#: the options of each tool, after the common ones
TOOL_OPTIONS = {
    "memcheck": ["--check-api-memory-access", "yes", "--check-device-heap", "yes"],
    "racecheck": ["--racecheck-report", "all"],
    "synccheck": [],
    "initcheck": [],
}

#: the summary line of each sanitized process: memcheck, synccheck and initcheck count errors,
#: racecheck counts hazards ("RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?")


class SanitizerNotFoundError(BuildtileError):
    """No compute-sanitizer binary could be found."""

    code = "BT0024"


@dataclass(frozen=True)
class SanitizeResult:
    tool: str
    errors: int | None     # None: the sanitizer wrote no summary (it did not run the program)
    program_status: int    # the sanitizer's exit status, the program's when no errors

    @property
    def status(self) -> int:
        """``buildtile sanitize``'s exit status."""
        if self.errors is None:
            return self.program_status or 1
        return 1 if self.errors else self.program_status

    def summary(self) -> str:
        if self.errors is None:
            return f"buildtile sanitize: {self.tool}: no report (the sanitizer exited with {self.program_status})"
        words = f"{self.errors} error{'' if self.errors == 1 else 's'}"
        tail = "" if self.program_status in (0, ERROR_EXITCODE) else f", program exited with {self.program_status}"
        return f"buildtile sanitize: {self.tool}: {words}{tail}"


def find_sanitizer(explicit: str | None = None) -> Path:
    """The compute-sanitizer binary to run; BT0024 names every place looked in when none is."""
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise SanitizerNotFoundError(f"--sanitizer {explicit}: no executable file there",
                                     help="give the path of the compute-sanitizer binary")
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    looked = ["PATH"]
    for folder in _candidate_dirs():
        looked.append(str(folder))
        candidate = folder / BINARY
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SanitizerNotFoundError(
        f"compute-sanitizer not found (looked in {', '.join(looked)})",
        help="install the CUDA toolkit or `pip install nvidia-cuda-sanitizer-api-cu12`, put compute-sanitizer "
             "on PATH, or pass --sanitizer PATH")


def _candidate_dirs() -> list[Path]:
    dirs = [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs += [Path("/usr/local/cuda/bin"), Path("/usr/local/cuda/compute-sanitizer")]
    versioned = sorted(Path("/usr/local").glob("cuda-*"), key=lambda p: _version_key(p.name), reverse=True)
    dirs += [p / sub for p in versioned for sub in ("bin", "compute-sanitizer")]
    dirs += [Path("/opt/cuda/bin")]
    dirs += _wheel_dirs()
    return dirs


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name))


def _wheel_dirs() -> list[Path]:
    """Where the ``nvidia-cuda-sanitizer-api`` wheels put the binary, under each ``nvidia`` folder."""
    roots = [Path(p) / "nvidia" for p in sys.path if p and Path(p, "nvidia").is_dir()]
    return [c.parent for r in roots for pattern in ("*/compute-sanitizer/" + BINARY, "*/bin/" + BINARY)
            for c in sorted(r.glob(pattern))]


def sanitizer_command(sanitizer: Path, tool: str, log_file: Path, command: list[str],
                      extra: list[str] = ()) -> list[str]:
    """The full command line: the sanitizer, its options, then the program and its arguments."""
    if tool not in TOOLS:
        raise BuildtileError(f"--tool {tool}: not a compute-sanitizer tool", code="BT0010",
                             help=f"tools: {', '.join(TOOLS)}")
    return [str(sanitizer), "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
            "--launch-timeout", str(LAUNCH_TIMEOUT_S), "--target-processes", "all",
            "--report-api-errors", "no", "--print-limit", "100", *TOOL_OPTIONS[tool],
            "--log-file", str(log_file), *extra, *command]


def sanitize(command: list[str], tool: str = "memcheck", *, sanitizer: str | None = None,
             extra: list[str] = ()) -> SanitizeResult:
    """Run ``command`` under ``tool``; the sanitizer's log goes to stderr, then the summary line."""
    if not command:
        raise BuildtileError("no program to run", code="BT0010",
                             help="buildtile sanitize --tool memcheck -- python -m example_kernels")
    binary = find_sanitizer(sanitizer)
    with tempfile.TemporaryDirectory(prefix="buildtile-sanitize-") as tmp:
        log = Path(tmp) / "sanitizer.log"
        try:
            status = subprocess.call(sanitizer_command(binary, tool, log, command, extra))
        except OSError as exc:
            raise SanitizerNotFoundError(f"{binary} could not be run: {exc.strerror or exc}") from None
        text = log.read_text(errors="replace") if log.exists() else ""
    if text:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
    counts = [int(a or b) for a, b in _SUMMARY.findall(text)]   # one summary per process followed
    result = SanitizeResult(tool, sum(counts) if counts else None, status)
    print(result.summary(), file=sys.stderr)
    return result


def cmd_sanitize(args) -> int:
    """The ``buildtile sanitize`` subcommand."""
    command = list(args.program)
    if command[:1] == ["--"]:
        command = command[1:]
    return sanitize(command, args.tool, sanitizer=args.sanitizer, extra=list(args.sanitizer_option)).status


def add_parser(sub) -> None:
    """``buildtile sanitize`` in the command's subparsers."""
    p = sub.add_parser("sanitize", help="run a program under NVIDIA's compute-sanitizer",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--tool", choices=TOOLS, default="memcheck")
    p.add_argument("--sanitizer", default=None, metavar="PATH", help="the compute-sanitizer binary")
    p.add_argument("-X", "--sanitizer-option", action="append", default=[], metavar="OPT",
                   help="one more option for compute-sanitizer (repeatable), e.g. --sanitizer-option=--leak-check=full")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- CMD ...: the program and its arguments")
    p.set_defaults(func=cmd_sanitize)
