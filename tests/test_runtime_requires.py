"""``requires`` relations: compiled once, evaluated with the meaning the C shim shares."""

from __future__ import annotations

import random

import pytest
from conftest import requires_tree

from buildtile.errors import BuildtileError
from buildtile.runtime.requires import (
    RequirementEvalError,
    combined_check,
    compile_requirement,
)

PARAMS = [
    {"name": "a", "kind": "slice", "dtype": "f32", "rank": 1},
    {"name": "m", "kind": "tensor", "dtype": "f32", "rank": 2},
    {"name": "n", "kind": "scalar", "dtype": "i64", "rank": 0},
    {"name": "u", "kind": "scalar", "dtype": "u64", "rank": 0},
]


class View:
    def __init__(self, *shape):
        self.shape = shape


def compiled(text):
    return compile_requirement(requires_tree(text), PARAMS, "kernel `k`")


def env(a=10, m=(3, 4), n=5, u=7):
    return (View(a), View(*m), n, u)


@pytest.mark.parametrize("text, holds", [
    ("len(a) == 10", True),
    ("m.shape[0] * m.shape[1] == 12", True),
    ("len(m) == 3", True),
    ("n - 7 // 2 == 2", True),
    ("-7 // 2 == -4", True),          # floor division, as Python and the C shim
    ("-7 % 2 == 1", True),
    ("not n > 4", False),
    ("n > 4 and len(a) < 5 or u == 7", True),
    ("(n > 4) + (n > 3) == 2", True),  # comparisons are 0 or 1
])
def test_relations_mean_what_they_say(text, holds):
    requirement = compiled(text)
    assert requirement.holds(env()) is holds
    check = combined_check([requirement])
    assert check(env()) == (-1 if holds else 0)


def test_overflow_and_division_by_zero_make_the_relation_fail():
    for text, reason in [("len(a) // (n - 5) == 1", "division by zero"),
                         ("n * 4611686018427387904 > 0", "int64 overflow")]:
        requirement = compiled(text)
        with pytest.raises(RequirementEvalError, match=reason):
            requirement.holds(env())
        assert combined_check([requirement])(env()) == 0


def test_u64_scalar_wraps_like_the_c_conversion():
    requirement = compiled("u < 0")
    assert requirement.holds(env(u=2**64 - 1))
    assert not requirement.holds(env(u=2**63 - 1))


def test_combined_check_reports_the_first_failing_relation():
    requirements = [compiled("len(a) == 10"), compiled("n == 6"), compiled("u == 0")]
    check = combined_check(requirements)
    assert check(env()) == 1
    assert check(env(n=6, u=0)) == -1
    assert combined_check([]) is None


def test_explanation_lists_each_quantity_once_in_source_order():
    requirement = compiled("len(a) == m.shape[1] * n + len(a)")
    assert requirement.explain(env()) == "len(a) = 10, m.shape[1] = 4, n = 5"


@pytest.mark.parametrize("tree, why", [
    ({"op": "len", "param": "nope"}, "no parameter named 'nope'"),
    ({"op": "len", "param": "n"}, "is a scalar"),
    ({"op": "shape", "param": "m", "axis": 2}, "out of range"),
    ({"op": "param", "name": "a"}, "not an integer scalar"),
    ({"op": "bin", "fn": "**", "lhs": {"op": "const", "value": 1}, "rhs": {"op": "const", "value": 1}},
     "unknown arithmetic operator"),
    ({"op": "const", "value": 1.5}, "not an int64"),
    ({"op": "const", "value": "__import__('os')"}, "not an int64"),
    ({"op": "call", "fn": "eval"}, "unknown operation"),
])
def test_malformed_trees_are_manifest_errors(tree, why):
    with pytest.raises(BuildtileError) as info:
        compile_requirement({"text": "t", "expr": tree}, PARAMS, "kernel `k`")
    assert info.value.code == "BT0621" and why in str(info.value)


def _random_tree(rng: random.Random, depth: int = 0):
    if depth > 3 or rng.random() < 0.3:
        choice = rng.randrange(5)
        if choice == 0:
            return {"op": "len", "param": "a"}
        if choice == 1:
            return {"op": "shape", "param": "m", "axis": rng.randrange(2)}
        if choice == 2:
            return {"op": "param", "name": rng.choice(["n", "u"])}
        return {"op": "const", "value": rng.choice([0, 1, -1, 2, 3, 7, -9, 2**62, -(2**63)])}
    op = rng.choice(["bin", "bin", "cmp", "and", "or", "not"])
    if op == "bin":
        return {"op": "bin", "fn": rng.choice(["+", "-", "*", "//", "%"]),
                "lhs": _random_tree(rng, depth + 1), "rhs": _random_tree(rng, depth + 1)}
    if op == "cmp":
        return {"op": "cmp", "fn": rng.choice(["==", "!=", "<", "<=", ">", ">="]),
                "lhs": _random_tree(rng, depth + 1), "rhs": _random_tree(rng, depth + 1)}
    if op == "not":
        return {"op": "not", "arg": _random_tree(rng, depth + 1)}
    return {"op": op, "args": [_random_tree(rng, depth + 1) for _ in range(rng.randrange(1, 4))]}


def _reference(tree, values) -> int:
    """The documented meaning, written out independently: int64, floor division, 0/1 logic.

    Raises ArithmeticError where a relation cannot be evaluated (which makes it fail).
    """
    op = tree["op"]
    if op == "const":
        return tree["value"]
    if op == "len":
        return values["a"] if tree["param"] == "a" else values["m"][0]
    if op == "shape":
        return values["m"][tree["axis"]]
    if op == "param":
        value = values[tree["name"]]
        return value - 2**64 if value >= 2**63 else value
    if op == "not":
        return int(_reference(tree["arg"], values) == 0)
    if op == "and":
        return int(all(_reference(a, values) != 0 for a in tree["args"]))
    if op == "or":
        return int(any(_reference(a, values) != 0 for a in tree["args"]))
    lhs, rhs = _reference(tree["lhs"], values), _reference(tree["rhs"], values)
    if op == "cmp":
        return int({"==": lhs == rhs, "!=": lhs != rhs, "<": lhs < rhs, "<=": lhs <= rhs,
                    ">": lhs > rhs, ">=": lhs >= rhs}[tree["fn"]])
    if tree["fn"] in ("//", "%") and rhs == 0:
        raise ArithmeticError("division by zero")
    result = {"+": lhs + rhs, "-": lhs - rhs, "*": lhs * rhs,
              "//": lhs // rhs if rhs else 0, "%": lhs % rhs if rhs else 0}[tree["fn"]]
    if not -(2**63) <= result < 2**63:
        raise ArithmeticError("int64 overflow")
    return result


def test_compiled_relations_agree_with_the_documented_meaning():
    rng = random.Random(1234)
    cases = [env(), env(a=0, m=(0, 7), n=-3, u=2**64 - 5), env(a=2**40, m=(1, 1), n=2**62, u=0)]
    for _ in range(3000):
        tree = _random_tree(rng)
        requirement = compile_requirement({"text": "random", "expr": tree}, PARAMS, "kernel `k`")
        check = combined_check([requirement])
        for e in cases:
            values = {"a": e[0].shape[0], "m": e[1].shape, "n": e[2], "u": e[3]}
            try:
                expected = _reference(tree, values) != 0
            except ArithmeticError:
                expected = False
            assert (check(e) == -1) is expected, tree
            try:
                assert requirement.holds(e) is expected, tree
            except RequirementEvalError:
                assert not expected, tree
