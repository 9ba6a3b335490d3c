"""The common Tile launch bound in one pass, with what a kernel's launches share worked out once.

:func:`~buildtile.runtime.tile.binding.bind` checks a launch step by step
and words each refusal. Most launches are plainly right, and for those
:class:`FastBinder` computes the same :class:`~buildtile.runtime.tile.
binding.TileBinding` with less work per call: the parameters' kinds, the
output pairs that may overlap, the move sites and scalar converters are
fixed when the binder is made, and the specialization and the grid are
memoized by what chooses them (tile shapes and dtypes; extents and tile
shape). Arrays are read with :func:`~buildtile.runtime.arrays.quick_view`.

The binder never refuses and has no side effect: on anything it is not sure
of (a moved handle, a failed check, an argument type without a quick view,
a tile shape left to the launch, a tile order) it returns None, and the
caller binds the general way, which accepts it or raises the refusal.
"""

from __future__ import annotations

from buildtile.runtime.arrays import HOST, quick_view
from buildtile.runtime.dtypes import ScalarRefused, scalar_converter
from buildtile.runtime.tile.binding import TileBinding
from buildtile.runtime.tile.grid import launch_grid, tile_counts
from buildtile.runtime.tile.handles import DEFAULT_SCHEDULE, MoveSite, OwnedHandle, plain_argument
from buildtile.runtime.tile.signature import TileSignature

#: memo entries kept per kernel before starting again (extents vary without end)
_MEMO_MAX = 256


class FastBinder:
    """The plainly right launches of one kernel, bound (see the module docstring)."""

    def __init__(self, sig: TileSignature) -> None:
        self.sig = sig
        params = sig.params
        self.count = len(params)
        #: per parameter: (is an array, is a tile.Out, writes it, rank, scalar converter)
        self.plan = tuple((p.is_array, p.is_tile_out, p.writes, p.rank,
                           None if p.is_array else scalar_converter(p.dtype)) for p in params)
        arrays = [p for p in params if p.is_array]
        #: the array parameter pairs that must not overlap (one of them is written)
        self.pairs = tuple((a.index, b.index) for i, a in enumerate(arrays) for b in arrays[i + 1:]
                           if a.writes or b.writes)
        self.outs = tuple(p.index for p in sig.outs)
        self.grid_index = sig.grid_param.index
        self.generic = tuple(p.index for p in params if p.name in sig.generic_params)
        #: generic kernels: the dtypes of the generic arrays -> (param_dtypes, dtype per parameter)
        self._groups: dict[tuple, tuple | None] = {}
        self._plain_dtypes = ((), tuple(p.dtype for p in params))
        names = [p.name for p in params]
        #: where each parameter's handle goes (a MoveSite is immutable: one serves every launch)
        self.sites = tuple(MoveSite.launch(sig.name, p.name, names) for p in params)
        #: id(function) -> the LaunchEntry of its plain entry (tile/launch.py; immutable, so shared)
        self.plain_entries: dict[int, object] = {}
        self._specs: dict[tuple, object] = {}
        self._grids: dict[tuple, tuple] = {}

    def bind(self, args: tuple, stream: int) -> TileBinding | None:
        """The binding :func:`~buildtile.runtime.tile.binding.bind` gives ``args``, or None when
        the general way must decide (see the module docstring)."""
        if len(args) != self.count:
            return None
        generic = self.generic
        expected = self._plain_dtypes[1]
        handles, tiles, views, env, values = [], [], [], [], []
        seen: set = set()
        device = None
        for (is_array, is_out, writes, rank, convert), arg, dtype in zip(self.plan, args, expected):
            if not is_array:
                if isinstance(arg, OwnedHandle):
                    return None
                try:
                    value = convert(arg)
                except ScalarRefused:
                    return None
                handles.append(None)
                tiles.append(None)
                views.append(None)
                env.append(value)
                values.append(value)
                continue
            plain = plain_argument(arg, is_out)
            if plain is None:
                return None
            handle, obj, tile_shape = plain
            # a repeated handle or array: the general way words it
            if id(obj) in seen:
                return None
            seen.add(id(obj))
            if handle is not None:
                if id(handle) in seen:
                    return None
                seen.add(id(handle))
            view = quick_view(obj)
            if (view is None or view.memory == HOST or (view.dtype != dtype and not generic)
                    or len(view.shape) != rank or (writes and view.read_only)
                    or (is_out and not view.is_contiguous())):
                return None
            lo, hi = view.byte_range()
            if lo == hi:
                lo = hi = 0
            elif not view.ptr:
                return None
            view.lo, view.hi = lo, hi
            if view.device is not None:
                if device is None:
                    device = view.device
                elif view.device != device:
                    return None
            handles.append(handle)
            tiles.append(tile_shape)
            views.append(view)
            env.append(view)
            values.append(view.ptr)
            values += view.shape
            values += view.strides

        group = ()
        if generic:
            group, dtypes = self._dtypes(views)
            if dtypes is None:
                return None
            for view, dtype in zip(views, dtypes):
                if view is not None and view.dtype != dtype:
                    return None
        for a, b in self.pairs:
            va, vb = views[a], views[b]
            if va.lo < vb.hi and vb.lo < va.hi:
                return None

        sig = self.sig
        out_tiles = tuple(tiles[k] for k in self.outs)
        spec = self._specs.get((out_tiles, group))
        if spec is None:
            spec = sig.exact_specialization(out_tiles, group)
            if spec is None:
                return None
            self._remember(self._specs, (out_tiles, group), spec)
        if sig.check_requires is not None and sig.check_requires(env) >= 0:
            return None
        shape = tuple(views[self.grid_index].shape)
        tile_shape = tiles[self.grid_index]
        grid = self._grids.get((shape, tile_shape))
        if grid is None:
            grid = launch_grid(tile_counts(shape, spec.tile_shape_of(sig.grid_param.name)))
            if grid is None:
                return None
            self._remember(self._grids, (shape, tile_shape), grid)
        if sig.takes_schedule:
            values.append(DEFAULT_SCHEDULE.word)
        returned = tuple(arg if view is None else view.obj for view, arg in zip(views, args))
        return TileBinding(spec, grid, tuple(values), returned, tuple(handles), tuple(views), None, stream,
                           False, True)

    def _dtypes(self, views: list) -> tuple:
        """A generic kernel's (param_dtypes, dtype per parameter) for the generic arrays' dtypes;
        (None, None) when none was compiled."""
        key = tuple(views[k].dtype for k in self.generic)
        try:
            return self._groups[key]
        except KeyError:
            pass
        sig = self.sig
        dtypes = {sig.params[k].name: dtype for k, dtype in zip(self.generic, key)}
        found = (None, None)
        for group, params in sig.dtype_groups.items():
            if all(dtypes.get(name, dtype) == dtype for name, dtype in group):
                found = (group, tuple(p.dtype for p in params))
                break
        self._remember(self._groups, key, found)
        return found

    @staticmethod
    def _remember(memo: dict, key, value) -> None:
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key] = value
