"""Exception types that carry a buildtile error code (``BT0308`` ...).

Internals raise these; the command line and the build hooks turn them into
one clean message at the boundary, never a traceback.
"""

from __future__ import annotations


class BuildtileError(Exception):
    """Base of every error buildtile reports to a user."""

    code: str = "BT0001"

    def __init__(self, message: str, *, code: str | None = None, help: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.help = help

    def __str__(self) -> str:
        text = f"error[{self.code}]: {self.message}"
        if self.help:
            text += f"\n  = help: {self.help}"
        return text


class ConfigError(BuildtileError):
    """Bad ``[tool.buildtile]`` configuration (names the key and the file)."""

    code = "BT0010"


class CompileError(BuildtileError):
    """One or more kernels failed the build-time checks; carries diagnostics."""

    code = "BT0100"

    def __init__(self, diagnostics: list) -> None:
        from buildtile.diagnostics import render_all, unique

        self.diagnostics = unique(list(diagnostics))
        first = self.diagnostics[0].code if self.diagnostics else "BT0100"
        super().__init__(render_all(self.diagnostics), code=first)

    def __reduce__(self):
        # rebuilt from its diagnostics (a compile job in a worker process may raise one)
        return type(self), (self.diagnostics,)

    def __str__(self) -> str:
        return self.message


class ToolchainError(BuildtileError):
    """LLVM or nvJitLink refused what we gave it (a buildtile bug or a missing tool)."""

    code = "BT0020"


class LaunchError(BuildtileError):
    """A launch refused before anything was queued."""

    code = "BT0600"


class TypeMismatchError(LaunchError):
    """Wrong dtype, rank, device or layout of a launch argument."""

    code = "BT0308"


class AliasingError(LaunchError):
    """An output buffer is also passed as another argument, or views overlap."""

    code = "BT0502"


class ContractError(LaunchError):
    """The launch configuration or the arguments break the kernel's contract."""

    code = "BT0600"


class NoImageError(LaunchError):
    """The package has no cubin or PTX usable on this device."""

    code = "BT0610"


class MovedError(BuildtileError):
    """A tensor handle used after it was moved into a Tile launch or a partition."""

    code = "BT0382"


class BoundsError(BuildtileError):
    """A kernel of a ``checks = "debug"`` build read outside an array.

    The device records the read; the host reports it at the next
    synchronisation, or before the next launch of a debug build. ``report``
    holds what was recorded (a :class:`buildtile.runtime.bounds.BoundsReport`:
    kernel, source site, index, extent, axis); ``str()`` shows the source
    line when it can be read.
    """

    code = "BT0601"

    def __init__(self, message: str, *, report: object = None, rendered: str | None = None,
                 help: str | None = None) -> None:
        super().__init__(message, help=help)
        self.report = report
        self.rendered = rendered

    def __str__(self) -> str:
        return self.rendered or super().__str__()


class CudaError(BuildtileError):
    """The CUDA driver returned an error."""

    code = "BT0700"
