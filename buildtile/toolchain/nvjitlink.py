"""PTX -> cubin with nvJitLink: no GPU and no CUDA toolkit needed."""

from __future__ import annotations

from buildtile.errors import ToolchainError


def ptx_to_cubin(ptx: str, target: str, *, name: str = "kernel.ptx", opt_level: int = 3) -> bytes:
    """Assemble and link PTX into a cubin for ``target`` (``sm_XX``)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:  # pragma: no cover - a dependency of buildtile
        raise ToolchainError("nvJitLink is not installed", help="pip install nvidia-nvjitlink cuda-bindings") from None
    options = [f"-arch={target}", f"-O{min(opt_level, 3)}"]
    handle = nvjitlink.create(len(options), options)
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            raise ToolchainError(f"nvJitLink could not link {name} for {target}: {exc}\n{_error_log(nvjitlink, handle)}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


def _error_log(nvjitlink, handle) -> str:
    try:
        size = nvjitlink.get_error_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)
        return log.decode(errors="replace").rstrip("\x00")
    except Exception:  # the log is a nicety; the error above already says what failed
        return ""


def nvjitlink_version() -> tuple[int, int]:
    from cuda.bindings import nvjitlink

    return tuple(nvjitlink.version())
