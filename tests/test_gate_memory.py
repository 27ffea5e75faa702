"""The gate's GPU memory plan (no GPU needed): what it decides before loading, and the
layer-streamed fp32 reference it counts on.

The shapes are the seeds' models: 13.3B (seed 000's full fine-tune: 61 layers, n_embd 4096) and
7.2B (seed 001's base: 32 layers), their bf16 file sizes as ``bench/gpu_gate.py`` builds them.
"""

from __future__ import annotations

import json
import weakref

import pytest
import torch
from click.testing import CliRunner

from registry.artifacts.miss import merge_delta
from registry.artifacts.synthetic import TinySpec, checkpoint_shapes, make_base_state_dict
from registry.cli.app import main
from registry.core.errors import Exit, RegistryError
from registry.core.models import Architecture
from registry.core.repo import Repo
from registry.gate.memory import CEILING_FACTOR, GIB, WORKSPACE, plan_gpu, refuse_unless_fits
from registry.gate.phases import plan_groups
from registry.gate.runtime import HEAD_CHUNK, MERGE_ROWS, Rwkv7, merged_weights
from registry.ops.init import init_registry

from .test_gate_smoke import state_registry

CARD = "NVIDIA Test 32GB (32.0 GiB, 31.5 GiB free)"


def _shape(n_layer: int) -> tuple[int, Architecture]:
    spec = TinySpec(n_layer=n_layer, n_embd=4096, vocab_size=65536)
    shapes = checkpoint_shapes(spec)
    bf16 = 2 * sum(torch.Size(s).numel() for s in shapes.values())
    return bf16, Architecture(n_layer=n_layer, n_embd=4096, head_size=64, vocab_size=65536, dim_ffn=4 * 4096)


@pytest.mark.parametrize(("layers", "card_gib"), [(61, 30), (32, 16)])
def test_the_seed_models_fit_their_cards_within_the_ceiling(layers, card_gib):
    """13.3B within 30 GiB, 7.2B within 16 GiB (issue #45), and the plan under its own ceiling:
    1.15x the weights plus one layer's working set."""
    weights, architecture = _shape(layers)
    plan = plan_gpu(CARD, card_gib * GIB, weights, architecture, adapter=36 * 2**20)
    assert plan.fits and plan.need <= card_gib * GIB
    assert plan.need <= plan.ceiling and plan.ceiling <= CEILING_FACTOR * weights + weights / layers * 2
    refuse_unless_fits(plan, ["e"])  # does not raise


def test_a_card_too_small_is_refused_in_one_line_naming_the_card_and_the_figure():
    weights, architecture = _shape(61)
    plan = plan_gpu(CARD, 24 * GIB, weights, architecture)
    assert not plan.fits
    with pytest.raises(RegistryError) as caught:
        refuse_unless_fits(plan, ["rwkv7-13b/full/v1/model.pth"])
    problem = caught.value.problem
    assert caught.value.exit_code == Exit.MACHINE and problem.code == "gate.gpu-memory"
    assert problem.file == "rwkv7-13b/full/v1/model.pth" and "\n" not in problem.message
    assert CARD in problem.message and f"{plan.need / GIB:.1f} GiB" in problem.message
    assert "24.0 GiB" in problem.message and f"{plan.need / GIB:.1f} GiB" in problem.fix


def test_the_figure_needed_grows_with_the_model_and_the_working_set_does_not():
    small, large = (plan_gpu(CARD, 80 * GIB, *_shape(n)) for n in (32, 61))
    assert large.weights > 1.8 * small.weights and large.need > small.need
    assert abs(large.working - small.working) < 0.02 * large.working  # one layer, the same width


def test_pristine_values_stay_on_the_gpu_only_when_the_plan_has_room_under_its_ceiling():
    weights, architecture = _shape(32)
    one_linear = 2 * 4096 * 4096
    every_linear = 32 * (4 * 4096 * 4096 + 2 * 4096 * 16384) * 2
    roomy = plan_gpu(CARD, 80 * GIB, weights, architecture, adapter=2**20)
    assert roomy.pristine_on_gpu(one_linear)  # an adapter on a few Linears: restored on the card
    assert not roomy.pristine_on_gpu(every_linear)  # seed 001's r16 (every Linear): from the host
    tight = plan_gpu(CARD, roomy.need, weights, architecture, adapter=2**20)
    assert tight.fits and not tight.pristine_on_gpu(one_linear)  # the budget, not only the ceiling


def test_without_a_recorded_architecture_the_plan_keeps_the_ceilings_margin_and_the_workspace():
    plan = plan_gpu(CARD, 16 * GIB, 10 * GIB, None)
    assert plan.need == plan.ceiling and abs(plan.need - CEILING_FACTOR * 10 * GIB - WORKSPACE) < 2 and plan.fits


# ---- the layer-streamed reference ------------------------------------------------------------


def test_the_layer_streamed_reference_equals_the_whole_model_reference_one_layer_at_a_time(monkeypatch):
    """The gate's fp32 reference of a bf16 model converts one layer at a time (and the head by
    chunks of vocabulary columns); it computes what an fp32 model of the same weights computes,
    bit for bit, and never holds two converted layers."""
    spec = TinySpec(n_layer=3, n_embd=128, vocab_size=HEAD_CHUNK * 2 + 5, seed=4)
    bf16 = {k: v.to(torch.bfloat16) for k, v in make_base_state_dict(spec).items()}
    whole = Rwkv7(bf16, dtype=torch.float32)  # the whole model converted once
    stored = Rwkv7(bf16, dtype=torch.bfloat16)
    streamed = stored.computing_in(torch.float32, "reference")
    converted: list[weakref.ref] = []
    alive_at_each_conversion: list[int] = []
    convert = Rwkv7._in_compute_dtype

    def tracking(self, tensors):
        alive_at_each_conversion.append(sum(ref() is not None for ref in converted))
        out = convert(self, tensors)
        if out is not tensors and "att.key.weight" in out:
            converted.append(weakref.ref(out["att.key.weight"]))
        return out

    monkeypatch.setattr(Rwkv7, "_in_compute_dtype", tracking)
    prompt = [1, 5, 300, 7, 9000, 12, 3]
    logits, state = streamed.forward(prompt)
    want, want_state = whole.forward(prompt)
    assert torch.equal(logits, want) and all(torch.equal(a, b) for a, b in zip(state, want_state, strict=True))
    assert len(converted) == spec.n_layer and max(alive_at_each_conversion) == 0
    assert all(t.dtype == torch.bfloat16 for t in stored.stored_weights().values())  # nothing stored was converted


def test_a_merge_by_row_slices_is_merge_delta_bit_for_bit():
    """MiSS merges run MERGE_ROWS rows at a time (the fp32 temporaries of a slice, not of the
    whole Linear); each row's merge is its own, so the result is merge_delta's exactly."""
    gen = torch.Generator().manual_seed(3)
    weight = torch.randn(2 * MERGE_ROWS + 7, 96, generator=gen).bfloat16()
    block = torch.randn(weight.shape[0], 40, generator=gen).bfloat16()  # 40 does not divide 96
    name = "blocks.0.ffn.key.weight"
    [(merged_name, merged)] = merged_weights({name: weight}, {name: block}, 0.37)
    want = merge_delta(weight, block, 0.37)
    assert (
        merged_name == name
        and merged.dtype == want.dtype
        and torch.equal(merged.view(torch.int16), want.view(torch.int16))
    )


def test_max_gpu_memory_that_is_not_a_size_is_refused_in_one_line(tmp_path):
    root = init_registry(tmp_path / "reg").root
    result = CliRunner().invoke(main, ["smoke", "-C", str(root), "--max-gpu-memory", "lots", "--json"])
    [problem] = json.loads(result.stdout)["problems"]
    assert result.exit_code == Exit.REFUSED and problem["code"] == "args.bad-size", result.stdout
    assert problem["file"] == "lots" and "--max-gpu-memory" in problem["fix"]


def test_smoke_plans_each_group_from_the_index_before_loading(tmp_path):
    """plan_groups, which smoke runs before it opens or loads anything: the base's State/MiSS
    entries are one group sized by the base file, with the base's recorded architecture; a budget
    below the plan is refused naming the entries; on CPU there is no plan."""
    root, base, entry = state_registry(tmp_path, TinySpec(n_layer=2, n_embd=128, seed=9))
    index = Repo.open(root).load_index()
    size = base.stat().st_size
    [(members, plan)] = plan_groups(index, ("Card", 80 * GIB), [entry], size, [])
    assert [e.path for e in members] == [entry.path] and plan is not None
    assert plan.weights == size and plan == plan_gpu("Card", 80 * GIB, size, index.bases[0].architecture)
    assert plan_groups(index, None, [entry], size, []) == [([entry], None)]
    with pytest.raises(RegistryError) as caught:
        plan_groups(index, ("Card", plan.need - 1), [entry], size, [])
    assert caught.value.problem.code == "gate.gpu-memory" and caught.value.problem.file == entry.path
