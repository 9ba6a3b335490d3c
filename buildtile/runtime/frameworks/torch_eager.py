"""The eager call of a kernel's torch op: straight into the kernel's launch, past the dispatcher.

A call of ``torch.ops.<package>.<kernel>(...)`` normally makes a round trip
through PyTorch's dispatcher: the arguments are parsed against the op's schema into C++
values, dispatched by key (autograd, then the device), and turned back into
Python objects for the op's Python implementation. For a kernel launch that
round trip costs more than the launch itself. So the op's packet (what
``torch.ops.<package>.<kernel>`` is) is an :class:`EagerOpPacket`: its call
launches the kernel itself when the dispatcher would add nothing, that is when

- no TorchFunctionMode (``with torch.device(...)`` is one), no
  TorchDispatchMode (``FakeTensorMode``, ``make_fx``, ``opcheck``'s schema
  checks), no functorch transform (``vmap``, ``grad``, ``functionalize``), no
  TorchScript tracing and no profiler is active (:data:`DISPATCH_STATE`,
  :data:`PROFILER`);
- every tensor argument is exactly a ``torch.Tensor`` (no subclass, such as
  a fake or functional tensor) that does not require grad, and the first one
  lives on CUDA or the CPU (a meta tensor runs the fake implementation; the
  launch refuses tensors on different devices, so one test of the device
  covers the call);
- every scalar is exactly of the Python type its schema names (``float``,
  ``int``, ``bool``), a SIMT grid is a list or tuple, and the only keywords
  are a Tile op's tile shapes, each None, a list or a tuple.

Any other call, every call of an overload (``torch.ops.<package>.<kernel>.default``)
and the calls a compiled graph makes go through the dispatcher, to the same
launch. Either way the launch path makes every check of a direct call, so both
ways accept and refuse the same arguments.

Each op's call is generated Python (:func:`eager_source`), straight-line, with
no string work, as the launch binders are (:mod:`buildtile.runtime.binders`);
with buildtile's compiled module the tests are one C call
(``_native.plain_torch_call``), and a SIMT op's whole call is compiled
(``_native.EagerCall``): its tests cost more than the rest of its way to the
launch, and an interpreted frame as much again.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType

import torch

from buildtile.runtime.native import compiled

#: what the dispatcher would act on, each a test of the calling thread's state that returns
#: something false when it is not active (see the module docstring), and the profiler's flag
#: (the module whose ``_is_profiler_enabled`` every profiler sets, which Inductor reads too);
#: None on a PyTorch that lacks one of them: every call then goes through the dispatcher.
#: Each is the cheapest test PyTorch has of its state: a call's tests cost more than the rest
#: of its way to the launch.
try:
    DISPATCH_STATE: tuple[Callable[[], object], ...] | None = (
        torch._C._is_torch_function_mode_enabled,     # TorchFunctionModes
        torch._C._len_torch_dispatch_stack,           # TorchDispatchModes (fake, proxy, functional ...)
        torch._C._are_functorch_transforms_active,    # vmap, grad, functionalize
        torch._C._is_tracing,                         # torch.jit.trace
    )
    PROFILER = torch.autograd.profiler
    PROFILER._is_profiler_enabled   # the flag is there, or no call is eager
except AttributeError:
    DISPATCH_STATE = PROFILER = None

#: what ``_native.plain_torch_call`` reads tensors with: the type, then requires_grad, is_cuda, is_cpu
TENSOR_GETTERS = (torch.Tensor, torch.Tensor.requires_grad, torch.Tensor.is_cuda, torch.Tensor.is_cpu)

#: the compiled test of a call, and the compiled call of a SIMT op (None without buildtile's
#: compiled module, or with one built before them)
_plain_call = getattr(compiled, "plain_torch_call", None)
_compiled_call = getattr(compiled, "EagerCall", None)

#: the call through the dispatcher (torch's own call of a packet)
DISPATCH = torch._ops.OpOverloadPacket.__call__

#: the exact types an eager call takes for each kind of positional argument (a tuple: any of them)
ARGUMENT_TYPES: dict[str, type | tuple[type, ...]] = {
    "grid": (list, tuple), "tensor": torch.Tensor, "float": float, "int": int, "bool": bool,
}


class EagerOpPacket(torch._ops.OpOverloadPacket):
    """``torch.ops.<package>.<kernel>``: torch's packet of the op, whose call launches the kernel
    without the dispatcher when the dispatcher would add nothing (see the module docstring).

    Each op's packet is of its own subclass, whose ``__call__`` is made for the op
    (:func:`install_eager`): compiled, or one generated frame between the caller and the
    kernel's launch."""


def install_eager(packet: torch._ops.OpOverloadPacket, kinds: list[str], keywords: tuple[str, ...],
                  op: object) -> Callable | None:
    """Make ``packet`` (torch's own, which its namespace keeps: whoever holds it gets the eager
    call) an :class:`EagerOpPacket` whose call launches through ``op`` for arguments of ``kinds``
    and ``keywords``: with buildtile's compiled module a SIMT op's call is ``_native.EagerCall``,
    every other one :func:`eager_source`'s. Returns that call, or None (nothing changed) on a
    PyTorch without the state tests or whose packets cannot change class."""
    if DISPATCH_STATE is None:
        return None
    name = packet._qualified_op_name
    plan = tuple(ARGUMENT_TYPES[kind] for kind in kinds)
    if _compiled_call is not None and kinds[:1] == ["grid"]:
        # called without the packet (it is no method): the dispatcher's call is bound to it
        call = _compiled_call(DISPATCH_STATE, plan, TENSOR_GETTERS, PROFILER, op, MethodType(DISPATCH, packet))
    else:
        source = eager_source(name, kinds, keywords, compiled_test=_plain_call is not None)
        namespace: dict = {
            "PLAIN": _plain_call, "STATE": DISPATCH_STATE, "PROFILER": PROFILER, "GETTERS": TENSOR_GETTERS,
            "PLAN": plan, **{f"STATE{k}": test for k, test in enumerate(DISPATCH_STATE)},
            **{f"TYPE{k}": ARGUMENT_TYPES[kind] for k, kind in enumerate(kinds)}, "OP": op, "DISPATCH": DISPATCH,
        }
        exec(compile(source, f"<buildtile eager call of torch op {name}>", "exec"), namespace)
        call = namespace["__call__"]
        call.__qualname__ = f"EagerOpPacket[{name}].__call__"
    try:
        packet.__class__ = type(f"EagerOpPacket[{name}]", (EagerOpPacket,), {"__call__": call, "__module__": __name__})
    except TypeError:   # a PyTorch whose packets cannot change class: they keep the dispatcher's call
        return None
    return call


def eager_source(name: str, kinds: list[str], keywords: tuple[str, ...] = (), *, compiled_test: bool) -> str:
    """The text of the packet's ``__call__(self, /, *args, **kwargs)`` for op ``name``, whose
    positional arguments are of ``kinds`` (keys of :data:`ARGUMENT_TYPES`; a SIMT op's grid
    first) and whose only keywords are ``keywords`` (a Tile op's tile shapes).

    When the call may skip the dispatcher (tested by ``PROFILER`` and ``PLAIN(args, STATE, PLAN,
    GETTERS)`` with ``compiled_test``, else in Python with ``STATE<k>`` and ``TYPE<k>``) it launches and returns
    None: a SIMT op as ``OP.kernel[tuple(grid)](...)``, a Tile op as ``OP.launch_tile(args,
    given)``, ``given`` holding each keyword passed with a shape, as a tuple. Otherwise it
    returns ``DISPATCH(self, *args, **kwargs)``, the dispatcher's call."""
    simt = bool(kinds) and kinds[0] == "grid"
    locals_ = ["grid" if simt and k == 0 else f"a{k}" for k in range(len(kinds))]
    out = [f"def __call__(self, /, *args, **kwargs):  # torch op `{name}`"]
    emit = out.append
    no_keywords = ("not kwargs and " if simt else "") + "not PROFILER._is_profiler_enabled and "
    if compiled_test:
        emit(f"    if {no_keywords}PLAIN(args, STATE, PLAN, GETTERS):")
        if locals_:
            emit(f"        {', '.join(locals_)}, = args")
        depth = "        "
    else:
        state = " or ".join(f"STATE{k}()" for k in range(len(DISPATCH_STATE or ())))
        emit(f"    if {no_keywords}len(args) == {len(kinds)} and not ({state}):")
        if locals_:
            emit(f"        {', '.join(locals_)}, = args")
        tests = []
        placed = False     # the first tensor's device tested (the launch refuses mixed devices)
        for k, (kind, local) in enumerate(zip(kinds, locals_)):
            if kind == "tensor":
                device = "" if placed else f" and ({local}.is_cuda or {local}.is_cpu)"
                tests.append(f"type({local}) is TYPE{k} and not {local}.requires_grad{device}")
                placed = True
            elif kind == "grid":
                tests.append(f"type({local}) in TYPE{k}")
            else:
                tests.append(f"type({local}) is TYPE{k}")
        emit(f"        if {' and '.join(tests) or 'True'}:")
        depth = "            "
    if simt:
        emit(f"{depth}OP.kernel[tuple(grid)]({', '.join(locals_[1:])})")
        emit(f"{depth}return None")
    else:
        emit(f"{depth}given = {{}}")
        emit(f"{depth}for keyword, shape in kwargs.items():")
        emit(f"{depth}    if keyword not in {keywords!r}:")
        emit(f"{depth}        break")
        emit(f"{depth}    if shape is not None:")
        emit(f"{depth}        if type(shape) is not list and type(shape) is not tuple:")
        emit(f"{depth}            break")
        emit(f"{depth}        given[keyword] = tuple(shape)")
        emit(f"{depth}else:")
        emit(f"{depth}    OP.launch_tile(args, given)")
        emit(f"{depth}    return None")
    emit("    return DISPATCH(self, *args, **kwargs)")
    return "\n".join(out) + "\n"
