"""How many bytes of kernel images a package carries, per kernel and per target.

A wheel holds each image once (the C ABI shim reads the same files), so
these sums are what the kernels add to the wheel before compression.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["image_sizes", "size_summary"]


def image_sizes(manifest: Mapping, sizes: Mapping[str, int] | None = None) -> dict[str, dict[str, int]]:
    """``{"<module>.<kernel>": {"sm_80": bytes, "PTX sm_80": bytes, ...}}`` over every image
    (all tile specializations of a Tile kernel and their TMA entries, or a SIMT kernel's two entries,
    together). A file's size in ``sizes`` (by its
    path in the manifest) wins over the size the manifest recorded."""
    sizes = sizes or {}
    out: dict[str, dict[str, int]] = {}
    for kernel in manifest["kernels"]:
        per_target = out.setdefault(f"{kernel['module']}.{kernel['name']}", {})
        entries = kernel.get("tile", {}).get("specializations", [{"artifacts": kernel["artifacts"]}])
        tma = [spec["tma"] for spec in entries if "tma" in spec]   # the sm_90a TMA entries
        for spec in [*entries, *tma, *([kernel["aligned"]] if "aligned" in kernel else [])]:
            for artifact in spec["artifacts"].values():
                target = artifact.get("target") or _target_of(artifact["path"])
                key = f"PTX {target}" if artifact["kind"] == "ptx" else target
                per_target[key] = per_target.get(key, 0) + sizes.get(artifact["path"], artifact.get("size", 0))
    return out


def size_summary(manifest: Mapping, sizes: Mapping[str, int] | None = None) -> list[str]:
    """``buildtile inspect``'s lines on image sizes: one per kernel, then the totals per target."""
    table = image_sizes(manifest, sizes)
    if not table:
        return []
    totals: dict[str, int] = {}
    for per_target in table.values():
        for key, size in per_target.items():
            totals[key] = totals.get(key, 0) + size
    width = max(map(len, table))
    lines = ["", "image sizes (bytes):"]
    for name, per_target in table.items():
        cells = ", ".join(f"{key} {size}" for key, size in sorted(per_target.items()))
        lines.append(f"  {name:<{width}}  {sum(per_target.values()):>8}  ({cells})")
    cells = ", ".join(f"{key} {size}" for key, size in sorted(totals.items()))
    lines.append(f"  {'all kernels':<{width}}  {sum(totals.values()):>8}  ({cells})")
    return lines


def _target_of(path: str) -> str:
    """``kernels/<symbol>.sm_90.cubin`` -> ``sm_90``."""
    return path.rsplit(".", 2)[-2]
