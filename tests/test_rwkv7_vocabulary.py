"""One vocabulary for the RWKV-7 checkpoint (issue #41): registry/artifacts/rwkv7.py says what a key
name, a layer, the head size and a model's shape are, and every reader asks it.  The guards read the
source, as test_rooms.py does: a key regex, a literal head size, a value-residual list or a second
shape type written anywhere else fails them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import registry
from registry.artifacts import rwkv7
from registry.artifacts.inspect import inspect_weights
from registry.artifacts.miss import default_targets
from registry.artifacts.synthetic import TinySpec, checkpoint_shapes, make_base_checkpoint
from registry.core.models import Architecture

PACKAGE = Path(registry.__file__).parent
HOME = PACKAGE / "artifacts" / "rwkv7.py"
HEAD_NAMES = ("head_size", "head_dim")
# The one type for a model's shape, and the synthetic builders' recipe (it also says dtype, seed and
# LoRA sizes: how to draw random weights, not what a checkpoint is).
SHAPE_TYPES = {"Architecture", "TinySpec"}


def _binds_head_size(node: ast.AST) -> list[int]:
    """Lines where a head-size name is bound to the literal head size (assignment, default, keyword)."""
    found = []

    def is_head_name(name: str | None) -> bool:
        return name is not None and any(h in name.lower() for h in HEAD_NAMES)

    def is_literal(value: ast.AST | None) -> bool:
        return isinstance(value, ast.Constant) and value.value == rwkv7.HEAD_SIZE and type(value.value) is int

    def target_name(target: ast.AST) -> str | None:
        return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None

    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and is_literal(sub.value):
            found += [sub.lineno for t in sub.targets if is_head_name(target_name(t))]
        elif isinstance(sub, ast.AnnAssign) and is_literal(sub.value) and is_head_name(target_name(sub.target)):
            found.append(sub.lineno)
        elif isinstance(sub, ast.keyword) and is_head_name(sub.arg) and is_literal(sub.value):
            found.append(sub.value.lineno)
        elif isinstance(sub, ast.arguments):
            positional = sub.posonlyargs + sub.args
            pairs = list(zip(positional[len(positional) - len(sub.defaults) :], sub.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(sub.kwonlyargs, sub.kw_defaults, strict=True) if d is not None]
            found += [d.lineno for a, d in pairs if is_head_name(a.arg) and is_literal(d)]
    return found


def _key_regexes(node: ast.AST) -> list[int]:
    """Lines of string constants that are a pattern over block keys (``blocks\\.``)."""
    return [
        sub.lineno
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "blocks\\." in sub.value
    ]


def _value_residual_lists(node: ast.AST) -> list[int]:
    """Lines of a tuple or list literal of exactly the value residual's parts."""
    return [
        sub.lineno
        for sub in ast.walk(node)
        if isinstance(sub, ast.Tuple | ast.List)
        and [e.value for e in sub.elts if isinstance(e, ast.Constant)] == list(rwkv7.VALUE_RESIDUAL)
    ]


def _shape_types(node: ast.AST) -> list[int]:
    """Lines of classes that declare a model's shape (both ``n_layer`` and ``n_embd``)."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.ClassDef) and sub.name not in SHAPE_TYPES:
            fields = {s.target.id for s in sub.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if {"n_layer", "n_embd"} <= fields:
                found.append(sub.lineno)
    return found


GUARDS = {
    "a literal head size": _binds_head_size,
    "a block-key regex": _key_regexes,
    "a value-residual list": _value_residual_lists,
    "a second shape type": _shape_types,
}


def _outside_home(guard) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for line in guard(ast.parse(path.read_text("utf-8")))
    ]


@pytest.mark.parametrize("what", GUARDS)
def test_the_vocabulary_is_written_only_in_its_module(what):
    assert _outside_home(GUARDS[what]) == [], f"{what} outside registry/artifacts/rwkv7.py"


@pytest.mark.parametrize(
    ("what", "planted"),
    [
        ("a literal head size", "HEAD_SIZE = 64"),
        ("a literal head size", "def f(x, *, head_size: int = 64): pass"),
        ("a literal head size", "def f(x, head_dim=64): pass"),
        ("a literal head size", "make(4, head_size=64)"),
        ("a literal head size", "class S:\n    head_size: int = 64"),
        ("a block-key regex", 'KEY = re.compile(r"blocks\\.(\\d+)\\.")'),
        ("a value-residual list", 'UNUSED = ("att.v0", "att.v1", "att.v2")'),
        ("a second shape type", "class ModelShape:\n    n_layer: int\n    n_embd: int"),
    ],
)
def test_the_guards_see_a_planted_copy(what, planted):
    assert GUARDS[what](ast.parse(planted)) != []


def test_the_vocabulary_module_itself_holds_what_the_guards_look_for():
    """The guards would pass vacuously if they could not see the originals."""
    tree = ast.parse(HOME.read_text("utf-8"))
    assert all(guard(tree) for what, guard in GUARDS.items() if what != "a second shape type")


def test_the_vocabulary_imports_no_torch():
    """Light commands (no torch installed) inspect through it."""
    code = "import sys, registry.artifacts.rwkv7; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- what it says --------------------------------------------------------------------------------


def test_block_keys_parse_into_layer_and_part():
    assert rwkv7.block_key("blocks.12.att.key.weight") == (12, "att.key.weight")
    assert rwkv7.block_key("emb.weight") is None
    assert rwkv7.block_name(3, "ffn.x_k") == "blocks.3.ffn.x_k"
    assert rwkv7.layer_count(["emb.weight", "blocks.0.ln1.weight", "blocks.9.att.r_k"]) == 10
    assert rwkv7.layer_count(["emb.weight"]) == 0
    assert rwkv7.state_layer(rwkv7.state_key(4)) == 4
    assert rwkv7.state_layer("blocks.4.att.r_k") is None


def test_the_value_residual_is_in_every_layer_but_the_first():
    assert not rwkv7.has_value_residual(0) and rwkv7.has_value_residual(1)
    assert not set(rwkv7.VALUE_RESIDUAL) & set(rwkv7.layer_keys(0))
    assert set(rwkv7.VALUE_RESIDUAL) <= set(rwkv7.layer_keys(1)) & set(rwkv7.required_keys(1))
    assert not set(rwkv7.VALUE_RESIDUAL) & set(rwkv7.required_keys(0))


@pytest.mark.parametrize("with_layer0_v", [True, False])
def test_a_checkpoint_holds_exactly_the_keys_the_vocabulary_names(with_layer0_v):
    spec = TinySpec(n_layer=3, n_embd=128, vocab_size=256, with_layer0_v=with_layer0_v)
    names = set(checkpoint_shapes(spec))
    used = set(rwkv7.GLOBAL_KEYS) | {rwkv7.block_name(i, k) for i in range(3) for k in rwkv7.layer_keys(i)}
    unused = {rwkv7.block_name(0, k) for k in rwkv7.VALUE_RESIDUAL} if with_layer0_v else set()
    assert names == used | unused


def test_the_shape_from_a_state_dict_is_the_shape_from_the_file(tmp_path):
    spec = TinySpec(n_layer=3, n_embd=128, vocab_size=256)
    from_names = rwkv7.shape_of(checkpoint_shapes(spec))
    assert isinstance(from_names, Architecture)
    assert from_names == inspect_weights(make_base_checkpoint(tmp_path / "b.pth", spec)).architecture
    assert (from_names.n_layer, from_names.n_head, from_names.head_size, from_names.dim_ffn) == (
        3,
        spec.n_head,
        rwkv7.HEAD_SIZE,
        spec.dim_ffn,
    )
    assert rwkv7.heads(from_names.model_copy(update={"n_head": None})) == spec.n_head


def test_the_miss_targets_are_the_linears_in_block_order():
    spec = TinySpec(n_layer=2, n_embd=128, vocab_size=256)
    names = [t.name for t in default_targets(checkpoint_shapes(spec))]
    assert names == [rwkv7.block_name(i, f"{t}.weight") for i in range(2) for t in rwkv7.MISS_TARGETS]
    assert rwkv7.miss_target_order("blocks.1.ffn.key.weight") == (1, rwkv7.MISS_TARGETS.index("ffn.key"))
    assert rwkv7.miss_target_order("blocks.1.att.w1") is None
    assert rwkv7.is_linear_weight("blocks.0.att.gate.weight") and not rwkv7.is_linear_weight("blocks.0.att.key.lora_A")


def test_a_recorded_shape_is_compared_field_by_field():
    arch = Architecture(n_layer=2, n_embd=128, head_size=64, vocab_size=256, n_head=2, dim_ffn=None)
    fields = {"layers": "n_layer", "width": "n_embd", "ffn": "dim_ffn"}
    said = {"layers": 3, "width": 128, "ffn": 999}
    assert list(rwkv7.recorded_differences(arch, said, fields)) == [("layers", 3, 2)]
