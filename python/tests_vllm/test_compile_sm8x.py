"""The sm_80 / sm_86 compile gate: vLLM 0.33.0's Triton kernels, launched through vLLM's own
wrappers with CPU tensors of model shapes, compiled (not run) for each target. The kernels the
SM8x path still launches must build; the ones that do not build must be exactly the replaced set,
each failing on its fp8 e4m3 conversion."""
import types

import pytest
import sm80_compile
import torch
from conftest import mode

pytestmark = mode("compile")

i32, i64, bf16, f32, u8 = torch.int32, torch.int64, torch.bfloat16, torch.float32, torch.uint8
T = 8


def z(*shape, dtype=f32):
    return torch.zeros(*shape, dtype=dtype)


def kept_launches():
    """Kernels the SM8x path keeps (vLLM's own code)."""
    from vllm.model_executor.kernels.mhc.triton import hc_collapse_triton
    from vllm.models.deepseek_v41 import attention, compressor
    from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import fused_save_compress_norm

    fused_save_compress_norm(z(T, 512), z(T, dtype=i64), None, z(T, dtype=i64), None, None, z(512, dtype=bf16),
                             1e-6, 1, z(T, 512, dtype=bf16))
    fused_save_compress_norm(z(T, 1024), z(T, dtype=i64), z(4, 8, 1024), z(T, dtype=i64), z(3, dtype=i32),
                             z(T, dtype=i32), z(512, dtype=bf16), 1e-6, 2, z(T, 512, dtype=bf16))
    attention._fill_short_context_topk_indices[(T,)](z(T, 512, dtype=i32), z(T, dtype=i64), TOP_K=512,
                                                     COMPRESS_RATIO=2, PADDED_TOP_K=512, num_warps=8)
    compressor._ring_slot_mapping_kernel[(1,)](z(T, dtype=i64), z(4, 2, dtype=i32), 2, z(T, dtype=i32),
                                               z(T, dtype=i64), T, T, CAPACITY=8, BLOCK=256)
    hc_collapse_triton(z(T, 4, 4096, dtype=bf16), z(T, 4))


def replaced_launches():
    """Kernels the SM8x path replaces with libdsv4."""
    from vllm.models.deepseek_v4.common.ops import fused_indexer_q
    from vllm.models.deepseek_v4.common.ops.fused_inv_rope_fp8_quant import fused_inv_rope_fp8_quant
    from vllm.models.deepseek_v41.common import engram
    from vllm.models.deepseek_v41.common.ops import cache_utils, indexer_k_store
    from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import rope_quant_insert

    rope_quant_insert(z(T, 512, dtype=bf16), z(T, dtype=i64), z(64, 64), z(2, 64, 584, dtype=u8),
                      z(T, dtype=i64), 2)
    indexer_k_store.mqa_logits_use_mx_scales = lambda: False
    indexer_k_store.indexer_k_norm_rope_store(z(T, 128, dtype=bf16), z(T, dtype=i64), z(64, 64),
                                              z(128, dtype=bf16), 1e-6, z(2, 64, 132, dtype=u8), z(T, dtype=i64),
                                              2, False)
    fused_indexer_q.has_cutedsl = lambda: False
    fused_indexer_q.current_platform = types.SimpleNamespace(
        fp8_dtype=lambda: torch.float8_e4m3fn, is_xpu=lambda: False, is_cpu=lambda: False, is_cuda=lambda: False,
        is_rocm=lambda: False)
    fused_indexer_q.fused_indexer_q_rope_quant(z(T, dtype=i64), z(T, 64, 128, dtype=bf16), z(64, 64),
                                               z(T, 64, dtype=bf16), 128 ** -0.5, 64 ** -0.5)
    fused_inv_rope_fp8_quant(z(T, 64, 512, dtype=bf16), z(T, dtype=i64), z(64, 64), n_groups=8, heads_per_group=8)
    engram._engram_lookup_kernel[(1,)](z(16, 256, dtype=torch.float8_e4m3fn), z(16, 8, dtype=u8), z(T, 6, dtype=i32),
                                       z(T, 6, dtype=i32), z(T, 4, 256, dtype=bf16), 0, 16, T * 4, 6, 1,
                                       HEAD_START=0, LOCAL_HEADS=4, TOTAL_HEADS=6, DIM=256, QUANT_BLOCK=32,
                                       BLOCK_R=16, GRID=1, SORTED=False, PACKED=False, OUT_STRIDE=1024, PEER_ROWS=0)
    cache_utils.dequantize_and_gather_k_cache_triton(z(2, 256, 512, dtype=bf16), z(4, 64, 584, dtype=u8),
                                                     z(2, dtype=i32), None, z(2, 4, dtype=i32), 64, 0)


KEPT = {
    "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache._fused_save_compress_norm_kernel",
    "vllm.models.deepseek_v41.attention._fill_short_context_topk_indices",
    "vllm.models.deepseek_v41.compressor._ring_slot_mapping_kernel",
    "vllm.model_executor.kernels.mhc.triton._hc_head_reduce_store_kernel",
}
REPLACED = {
    "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache._rope_quant_insert_kernel",
    "vllm.models.deepseek_v41.common.ops.indexer_k_store._indexer_k_norm_rope_quant_store_kernel",
    "vllm.models.deepseek_v4.common.ops.fused_indexer_q.FusedIndexerQRopeQuantTritonKernel.kernel",
    "vllm.models.deepseek_v4.common.ops.fused_inv_rope_fp8_quant.FusedInvRopeFP8QuantKernel.kernel",
    "vllm.models.deepseek_v41.common.engram._engram_lookup_kernel",
    "vllm.models.deepseek_v41.common.ops.cache_utils._dequantize_and_gather_k_kernel",
}


@pytest.mark.parametrize("capability", [80, 86])
def test_sm8x_compile_gate(capability):
    sm80_compile.set_target(capability)
    sm80_compile.RESULTS.clear()
    kept_launches()
    kept = dict(sm80_compile.RESULTS)
    sm80_compile.RESULTS.clear()
    replaced_launches()
    replaced = dict(sm80_compile.RESULTS)
    for name, err in sorted({**kept, **replaced}.items()):
        print(f"sm_{capability} {'builds ' if err is None else 'FAILS  '} {name}")
    assert set(kept) == KEPT, set(kept) ^ KEPT
    assert {n: e for n, e in kept.items() if e} == {}
    assert set(replaced) == REPLACED, set(replaced) ^ REPLACED
    builds = sorted(n for n, e in replaced.items() if e is None)
    # Which replaced kernels do build (no fp8 left in their compiled branch) is reported, not hidden.
    print(f"sm_{capability}: replaced kernels that also build: {builds}")
    for name, err in replaced.items():
        if err is not None:
            assert "fp8e4nv" in err or "float8" in err.lower() or "e4m3" in err.lower(), (name, err[:400])
