"""A seeded kernel mutator: mutants of the example kernels and the must-pass corpus, each run
through ``buildtile check`` and the compile (analyze -> LLVM IR -> PTX) in a worker process.

Every mutant must end in one of two ways: success, or BT-coded diagnostics / a
``BuildtileError``. Anything else is an internal error: another exception (its type and the
innermost buildtile frame say which), or a dead worker (LLVM aborts the process on a failed
assertion), or a worker that takes longer than :data:`CASE_TIMEOUT_S`.

Mutations, one to three per mutant, chosen by a ``random.Random(seed)``: swap an operator,
change a constant (zero, negative, huge, float, bool), drop or duplicate a statement, change an
annotation's dtype or kind, rename a name, wrap a statement in ``if``/``for``, deepen an
expression, change a decorator keyword. The same seed gives the same mutants.

Long runs: ``python scripts/fuzz.py kernels --cases 20000 --seed 1``.
"""

from __future__ import annotations

import ast
import json
import os
import random
import selectors
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted([*(ROOT / "example_project" / "example_kernels").glob("[!_]*.py"),
                 *(ROOT / "tests" / "ui" / "pass").glob("*.py"),
                 *(ROOT / "tests" / "ui" / "tile" / "pass").glob("*.py")])
CASE_TIMEOUT_S = 180   # a loaded CI machine compiles the biggest corpus module in ~10 s

BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
          ast.BitAnd, ast.BitOr, ast.BitXor]
CMPOPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq]
CONSTANTS = [0, 1, -1, 2, -7, 31, 32, 64, -64, 255, 2**31 - 1, 2**31, -2**31, 2**32, 2**63 - 1, 2**63, 2**64,
             -2**70, 10**30, 0.0, -0.0, 0.5, -1.5, 1e38, 1e39, 65504.0, 65520.0, 1e300, 1e-320, True, False]
DTYPES = ["f32", "f16", "bf16", "f64", "i32", "i64", "u32", "u64", "bool"]
KINDS = ["Slice", "DisjointSlice", "AtomicSlice", "Tensor", "DisjointTensor"]
NAMES = ["i", "x", "n", "tmp", "simt", "tile", "math", "len", "range", "f32", "undefined_name"]


def mutate(source: str, rng: random.Random, count: int | None = None) -> str | None:
    """A mutant of ``source``: 1-3 mutations (or ``count``); None when no mutation applied."""
    tree = ast.parse(source)
    applied = 0
    for _ in range(count or rng.randint(1, 3)):
        applied += _MUTATIONS[rng.randrange(len(_MUTATIONS))](tree, rng)
    if not applied:
        return None
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree)
    except (ValueError, RecursionError):
        return None


def _nodes(tree: ast.AST, kind) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, kind)]


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [s for s in tree.body if isinstance(s, ast.FunctionDef)]


def _swap_operator(tree, rng) -> int:
    nodes = _nodes(tree, (ast.BinOp, ast.AugAssign, ast.Compare, ast.UnaryOp))
    if not nodes:
        return 0
    node = rng.choice(nodes)
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = rng.choice(BINOPS)()
    elif isinstance(node, ast.Compare):
        node.ops = [rng.choice(CMPOPS)() for _ in node.ops]
    else:
        node.op = rng.choice([ast.USub, ast.Not, ast.Invert, ast.UAdd])()
    return 1


def _change_constant(tree, rng) -> int:
    nodes = [n for n in _nodes(tree, ast.Constant) if not isinstance(n.value, str)]
    if not nodes:
        return 0
    rng.choice(nodes).value = rng.choice(CONSTANTS)
    return 1


def _bodies(tree) -> list[list]:
    return [n.body for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.For, ast.While, ast.If))
            and n.body] + [n.orelse for n in _nodes(tree, (ast.If, ast.For)) if n.orelse]


def _drop_statement(tree, rng) -> int:
    bodies = [b for b in _bodies(tree) if len(b) > 1]
    if not bodies:
        return 0
    body = rng.choice(bodies)
    del body[rng.randrange(len(body))]
    return 1


def _duplicate_statement(tree, rng) -> int:
    bodies = _bodies(tree)
    if not bodies:
        return 0
    body = rng.choice(bodies)
    k = rng.randrange(len(body))
    body.insert(k, ast.parse(ast.unparse(body[k])).body[0])
    return 1


def _change_annotation(tree, rng) -> int:
    names = [n for f in _functions(tree) for a in f.args.args if a.annotation is not None
             for n in _nodes(a.annotation, ast.Name)]
    if not names:
        return 0
    node = rng.choice(names)
    node.id = rng.choice(KINDS if node.id in KINDS else DTYPES)
    return 1


def _rename(tree, rng) -> int:
    names = _nodes(tree, ast.Name)
    if not names:
        return 0
    rng.choice(names).id = rng.choice(NAMES)
    return 1


def _wrap(tree, rng) -> int:
    bodies = [f.body for f in _functions(tree) if f.decorator_list] or _bodies(tree)
    if not bodies:
        return 0
    body = rng.choice(bodies)
    k = rng.randrange(len(body))
    head = rng.choice(["if i > 0:\n    pass", "for _k in range(3):\n    pass", "while False:\n    pass",
                       "if True:\n    pass\nelse:\n    pass"])
    wrapper = ast.parse(head).body[0]
    wrapper.body = [body[k]]
    body[k] = wrapper
    return 1


def _deepen(tree, rng) -> int:
    exprs = [n for n in _nodes(tree, ast.BinOp)]
    if not exprs:
        return 0
    node = rng.choice(exprs)
    depth = rng.choice([2, 8, 50, 200, 700])
    term = node.right
    for _ in range(depth):
        node.right = ast.BinOp(node.right, rng.choice([ast.Add, ast.Mult, ast.Sub])(),
                               ast.parse(ast.unparse(term), mode="eval").body)
    return 1


def _change_keyword(tree, rng) -> int:
    calls = [d for f in _functions(tree) for d in f.decorator_list if isinstance(d, ast.Call)]
    if not calls:
        return 0
    call = rng.choice(calls)
    value = rng.choice(["0", "-1", "1.5", "2048", "(32, 32, 2)", "(1, 1, 1, 1)", "'x'", "True", "2**40",
                        "[]", "(0,)", "None"])
    keyword = rng.choice(["block", "block", "min_blocks", "dynamic_shared", "min_compute_capability",
                          "tiles", "requires", "colour"])
    call.keywords.append(ast.keyword(keyword, ast.parse(value, mode="eval").body))
    return 1


_MUTATIONS = [_swap_operator, _change_constant, _change_constant, _drop_statement, _duplicate_statement,
              _change_annotation, _rename, _wrap, _deepen, _change_keyword, _swap_operator]


# ------------------------------------------------------------------ running mutants

@dataclass(frozen=True)
class Outcome:
    kind: str            # "ok", "refused" (BT diagnostics or a BuildtileError), "internal", "crash", "timeout"
    detail: str = ""     # the BT codes, or what went wrong (exception type and innermost frame)

    @property
    def is_internal(self) -> bool:
        return self.kind in ("internal", "crash", "timeout")


@dataclass
class Report:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    internal: dict = field(default_factory=dict)   # distinct internal error -> (source, name) of a reproducer

    def add(self, outcome: Outcome, source: str, name: str) -> None:
        self.cases += 1
        self.outcomes[outcome.kind] += 1
        if outcome.is_internal:
            self.internal.setdefault(f"{outcome.kind}: {outcome.detail}", (source, name))


class Worker:
    """A process that checks and compiles one mutant at a time (tests/fuzz/kernel_worker.py);
    restarted after it dies or hangs."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        return subprocess.Popen([sys.executable, str(Path(__file__).with_name("kernel_worker.py"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, env=env)

    def run(self, source: str, name: str) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        try:
            proc.stdin.write(json.dumps({"source": source, "name": name}) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:   # it died between two cases
            self.proc = None
            return Outcome("crash", f"worker died with status {proc.wait()}")

        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(CASE_TIMEOUT_S):
                self.close()
                return Outcome("timeout", f"no answer in {CASE_TIMEOUT_S} s")
        line = proc.stdout.readline()
        if not line:
            status = proc.wait()
            self.proc = None
            return Outcome("crash", f"worker died with status {status}")
        answer = json.loads(line)
        return Outcome(answer["kind"], answer["detail"])

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def run_cases(cases: int, seed: int, worker: Worker | None = None, log=None) -> Report:
    """``cases`` mutants from ``seed``, each checked and compiled; the report of their outcomes."""
    rng = random.Random(seed)
    sources = {p: p.read_text() for p in CORPUS}
    report = Report()
    worker = worker or Worker()
    try:
        while report.cases < cases:
            path = rng.choice(CORPUS)
            mutant = mutate(sources[path], rng)
            if mutant is None:
                continue
            outcome = worker.run(mutant, path.stem)
            report.add(outcome, mutant, path.stem)
            if log is not None and outcome.is_internal:
                log(f"case {report.cases} ({path.name}): {outcome.kind}: {outcome.detail}")
    finally:
        worker.close()
    return report
