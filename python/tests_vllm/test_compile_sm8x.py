"""The sm_80 / sm_86 compile gate: vLLM 0.33.0's Triton kernels, launched through vLLM's own
wrappers with CPU tensors of model shapes, compiled (not run) for each target. The kernels the
SM8x path still launches must build; the ones that do not build must be exactly the replaced set,
each failing on its fp8 e4m3 conversion. The inventory test keeps the lists complete."""
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
    metadata_launches()
    engram_launches()
    router_launches()


def raw(kernel, grid, scalars=(), **given):
    """A kernel without a wrapper: int32 CPU buffers for its pointers, T for its sizes and strides."""
    args = {}
    for n in kernel.arg_names:
        if n in given:
            args[n] = given[n]
        elif n in scalars or "stride" in n or n.startswith("num_"):
            args[n] = T
        else:
            args[n] = z(64, dtype=i32)
    kernel[grid](**args)


def metadata_launches():
    """The SWA, compressed-slot, indexer and replay metadata kernels (integer only)."""
    from vllm.models.common.ops import fused_q_kv_rmsnorm
    from vllm.models.deepseek_v41.common.ops import fused_compress_quant_cache as fcq
    from vllm.models.deepseek_v41.nvidia import model_state
    from vllm.v1.attention.backends.mla import compressor_utils, indexer, sparse_swa
    from vllm.v1.attention.ops import metadata

    q = z(4, dtype=i32)
    sparse_swa._COMPUTE_PREFILL_METADATA_KERNEL(q, q, z(5, dtype=i32), q, 2, 2, 128)
    for image in (False, True):
        sparse_swa._COMPUTE_SWA_INDICES_AND_LENS_KERNEL(z(T, 128, dtype=i32), z(T, dtype=i32), 128, 128, z(T, dtype=i32),
                                                        z(T, dtype=i32), z(5, dtype=i32), q, z(T, dtype=i32),
                                                        z(T, dtype=torch.bool), z(4, 64, dtype=i32), 64, q,
                                                        num_tokens=T, token_offset=0, has_image=image)
    sparse_swa._COMPUTE_DSPARK_NONCAUSAL_SWA_INDICES_KERNEL(z(T, 192, dtype=i32), z(T, dtype=i32), 128, 192,
                                                            z(5, dtype=i32), q, z(T, dtype=i32),
                                                            z(T, dtype=torch.bool), z(4, 64, dtype=i32), 64,
                                                            num_tokens=T, token_offset=0)
    raw(sparse_swa._compute_image_visibility_kernel, (T,), scalars=("max_image_tokens", "token_offset"))
    compressor_utils.get_compressed_slot_mapping(T, z(T, dtype=i64), z(5, dtype=i32), q, z(4, 64, dtype=i32), 256,
                                                 4, out=z(T, dtype=i64))
    indexer._PREPARE_UNIFORM_DECODE_KERNEL(q, z(T, dtype=i32), z(4, 64, dtype=i32), z(T, 64, dtype=i32),
                                           z(T, dtype=i32), T, 2)
    c = z(5, dtype=i32)
    indexer._BUILD_PREFILL_CHUNK_METADATA_KERNEL(z(5, dtype=i32), q, c, c, z(T, dtype=i32), z(T, dtype=i32),
                                                 z(T, dtype=i32), 0, T, 0, 1, 1, num_reqs=4, COMPRESS_RATIO=4)
    raw(indexer._kpool_tail_slot_mapping_kernel, (4,), scalars=("kpool",), slot_mapping_ptr=z(T, dtype=i64),
        positions_ptr=z(T, dtype=i64), out_ptr=z(T, dtype=i64), BLOCK=256, num_warps=4)
    raw(metadata._indexer_decode_metadata_kernel, (T,), scalars=("capacity",), BLOCK_COLS=64, num_warps=4)
    metadata.compute_token_to_req_indices(z(5, dtype=i32), z(T, dtype=i32), T, T)
    raw(model_state._gather_lookback_kernel, (4,), DEPTH=2, BLOCK_DEPTH=2)
    raw(model_state._pad_replayed_slots_kernel, (4,), scalars=("window", "pad_slot_id"),
        slot_mappings_ptr=z(2, T, dtype=i64), NUM_GROUPS=2, BLOCK=256)
    raw(model_state._gather_replay_batch_kernel, (4,), scalars=("window",), slot_mappings_ptr=z(2, T, dtype=i64),
        kept_slot_mappings_ptr=z(2, T, dtype=i64), NUM_GROUPS=2, BLOCK=256)
    fused_q_kv_rmsnorm(z(T, 1024, dtype=bf16), z(T, 512, dtype=bf16), z(1024, dtype=bf16), z(512, dtype=bf16), 1e-6)
    fcq.save_ring_rows(z(T, 1024), z(T, dtype=i64), z(4, 8, 1024))


def engram_launches():
    """The Engram hash, post-projection and row-selection kernels (the lookup itself is replaced)."""
    from vllm.models.deepseek_v41.common import engram

    raw(engram._write_hash_cache_kernel, (1,), scalars=("dead_id",), input_ids=z(T, dtype=i64),
        cache=z(64, dtype=i64), BLOCK_SIZE=256)
    raw(engram._hash_ids_kernel, (1,), scalars=("pad_id", "dead_id", "lookback_depth", "max_blocks",
                                                "cache_block_size"),
        input_ids=z(T, dtype=i64), positions=z(T, dtype=i64), multipliers=z(6, 3, dtype=i64),
        cache=z(64, dtype=i64), lookback_token_ids=z(T, 2, dtype=i64), MAX_NGRAM=3, num_heads=6, BLOCK_T=16,
        BLOCK_H=8)
    raw(engram._fused_engram_post_wkv_kernel, (T,), scalars=("eps", "clamp_value"),
        hidden_states=z(T, 4, 4096, dtype=bf16), kv=z(T, 4096, dtype=bf16), q_weight=z(4, 4096, dtype=bf16),
        k_weight=z(4, 4096, dtype=bf16), token_mask=z(T, dtype=torch.bool), output=z(T, 4, 4096, dtype=bf16),
        eps=1e-6, clamp_value=1.0, DIM=4096, HC_MULT=4, BLOCK_SIZE=4096, HAS_MASK=True)
    raw(engram._engram_select_rows_kernel, (T,), scalars=("token_start",), gathered=z(T, 1024, dtype=bf16),
        output=z(T, 1024, dtype=bf16), LOCAL_WIDTH=1024, WIDTH=2048, BLOCK_SIZE=1024)


def router_launches():
    """The MoE router's top-k (sqrtsoftplus scores, 6 of 256 or 384 experts, fp32 logits), which
    vLLM defines only under the CUDA platform; PDL stays off as on SM8x."""
    from vllm.models.deepseek_v41.common.mm_preprocess import IMAGE_SENTINEL_BASE_ID

    router = sm80_compile.load_as_cuda("vllm.model_executor.layers.fused_moe.router.dsv4_topk")
    for experts, ids, padded, vl in ((256, i32, False, False), (384, i64, True, True)):
        router.dsv4_topk(z(T, experts), z(experts), ids, 1.5, is_padding=z(T, dtype=torch.bool) if padded else None,
                         input_ids=z(T, dtype=i64) if vl else None, bias_vl=z(experts) if vl else None,
                         image_sentinel_lo=IMAGE_SENTINEL_BASE_ID if vl else 0)


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
    "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache._save_ring_rows_kernel",
    "vllm.models.common.ops.fused_qk_rmsnorm.FusedQKVRMSNormKernel.kernel",
    "vllm.v1.attention.backends.mla.sparse_swa.ComputePrefillMetadataKernel.kernel",
    "vllm.v1.attention.backends.mla.sparse_swa._compute_swa_indices_and_lens_kernel",
    "vllm.v1.attention.backends.mla.sparse_swa.ComputeDSparkNoncausalSWAIndicesKernel.kernel",
    "vllm.v1.attention.backends.mla.sparse_swa._compute_image_visibility_kernel",
    "vllm.v1.attention.backends.mla.compressor_utils.CompressedSlotMappingKernel.kernel",
    "vllm.v1.attention.backends.mla.indexer.PrepareUniformDecodeKernel.kernel",
    "vllm.v1.attention.backends.mla.indexer.BuildPrefillChunkMetadataKernel.kernel",
    "vllm.v1.attention.backends.mla.indexer._kpool_tail_slot_mapping_kernel",
    "vllm.v1.attention.ops.metadata._indexer_decode_metadata_kernel",
    "vllm.v1.attention.ops.metadata._token_request_mapping_kernel",
    "vllm.models.deepseek_v41.nvidia.model_state._gather_lookback_kernel",
    "vllm.models.deepseek_v41.nvidia.model_state._pad_replayed_slots_kernel",
    "vllm.models.deepseek_v41.nvidia.model_state._gather_replay_batch_kernel",
    "vllm.models.deepseek_v41.common.engram._write_hash_cache_kernel",
    "vllm.models.deepseek_v41.common.engram._hash_ids_kernel",
    "vllm.models.deepseek_v41.common.engram._fused_engram_post_wkv_kernel",
    "vllm.models.deepseek_v41.common.engram._engram_select_rows_kernel",
    "vllm.model_executor.layers.fused_moe.router.dsv4_topk._dsv4_topk_kernel",
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


# The modules of the V4.1 CUDA path that define Triton kernels (model, attention backends and
# their metadata builders, the ops they call, the MoE router) and the CUDA-only packages next to
# them; the inventory guard reads every kernel in them (a package: in every module under it).
PATH_MODULES = (
    "vllm.models.deepseek_v41.attention", "vllm.models.deepseek_v41.compressor",
    "vllm.models.deepseek_v41.common.engram", "vllm.models.deepseek_v41.common.ops.cache_utils",
    "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache",
    "vllm.models.deepseek_v41.common.ops.indexer_k_store", "vllm.models.deepseek_v41.common.ops.query_quant",
    "vllm.models.deepseek_v41.nvidia.model_state", "vllm.models.deepseek_v4.common.ops.fused_indexer_q",
    "vllm.models.deepseek_v4.common.ops.fused_inv_rope_fp8_quant", "vllm.models.common.ops.fused_qk_rmsnorm",
    "vllm.v1.attention.backends.mla.sparse_swa", "vllm.v1.attention.backends.mla.indexer",
    "vllm.v1.attention.backends.mla.compressor_utils", "vllm.v1.attention.ops.metadata",
    "vllm.model_executor.kernels.mhc.triton", "vllm.model_executor.layers.sparse_attn_indexer",
    "vllm.model_executor.kernels.attention.dsa.candidate_blocks",
    "vllm.model_executor.layers.fused_moe.router.dsv4_topk", "vllm.models.deepseek_v41.nvidia.ops.engram_peer",
    "vllm.models.deepseek_v41.nvidia.specialized_decode",
)
_V41 = "vllm.models.deepseek_v41.common"
_CU = f"{_V41}.ops.cache_utils"
_FCQ = f"{_V41}.ops.fused_compress_quant_cache"
_SD = "vllm.models.deepseek_v41.nvidia.specialized_decode.attention"
_SD_WHY = "specialized decode, which specialized_decode_config refuses without an SM103 (GB300) GPU"
EXCLUDED = {
    f"{_CU}.CombineTopkSwaIndicesKernel.kernel": "replaced by combine_topk_swa (prefill is the only caller)",
    f"{_CU}._compute_global_topk_indices_and_lens_kernel": "replaced by topk_translate in decode",
    f"{_CU}._dequantize_and_gather_k_one_pass_kernel": "ROCm only",
    f"{_CU}._dequantize_and_gather_k_mxfp8_kernel": "MXFP8 KV cache, which the plugin rejects",
    f"{_CU}._dequantize_and_gather_k_nvfp4_kernel": "NVFP4 KV cache, which the plugin rejects",
    f"{_CU}._quantize_and_insert_k_mxfp8_kernel": "MXFP8 KV cache, which the plugin rejects",
    f"{_CU}.quantize_and_insert_k_kernel": "no V4.1 CUDA caller (the SWA writer is vLLM's CUDA op)",
    f"{_CU}._build_flashinfer_mixed_sparse_indices_kernel": "FlashInfer sparse backend, not on SM8x",
    f"{_FCQ}._rope_quant_insert_mxfp8_kernel": "MXFP8 compressed cache, which the plugin rejects",
    f"{_FCQ}._rope_quant_insert_nvfp4_kernel": "NVFP4 compressed cache, which the plugin rejects",
    f"{_FCQ}._rope_plain_insert_kernel": "bf16 compressed cache, which the plugin rejects",
    f"{_V41}.engram._engram_unpack_fp8_kernel": "packed Engram staging, not on SM8x",
    f"{_V41}.ops.query_quant._q_kv_norm_quant_kernel":
        "taken only with FlashInfer MXFP8 linears (SM100); does not build for sm_80 (fp8e4nv)",
    "vllm.models.deepseek_v4.common.ops.fused_indexer_q.FusedIndexerQRopeMxFp4TritonKernel.kernel":
        "MXFP4 indexer cache, which the plugin rejects",
    "vllm.model_executor.layers.sparse_attn_indexer._fused_indexer_q_rope_quant_kernel":
        "the scoring op class replaces SparseAttnIndexer",
    "vllm.model_executor.layers.sparse_attn_indexer._upcast_logits_kernel":
        "the scoring op class replaces SparseAttnIndexer",
    "vllm.model_executor.kernels.mhc.triton._rmsnorm_nw_kernel": "called only by ROCm AITER code",
    "vllm.model_executor.kernels.mhc.triton._mhc_pre_mix_kernel": "called only by ROCm AITER code",
    **{f"vllm.model_executor.kernels.attention.dsa.candidate_blocks.{k}": "replaced by indexer_topk's candidate blocks"
       for k in ("_block_scores_kernel", "_candidate_flags_kernel", "_mask_candidates_kernel",
                 "_store_candidates_kernel")},
    f"{_SD}.indexer_k_store._k_norm_rope_mxfp4_store_kernel": _SD_WHY,
    f"{_SD}.candidate_topk._block_scores_kernel": _SD_WHY,
    f"{_SD}.candidate_topk._finalize_candidates_kernel": _SD_WHY,
    "vllm.models.deepseek_v41.nvidia.ops.engram_peer._peer_lookup_kernel":
        "EngramPeerExchange.create returns None off SM10x (is_device_capability_family(100))",
}


def test_inventory_covers_path():
    """Every Triton kernel of the path's modules is compiled by the gate or excluded with a reason,
    so a kernel added by another vLLM shows up here."""
    files = {m: f for name in PATH_MODULES for m, f in sm80_compile.module_files(name).items()}
    found = set().union(*(sm80_compile.jit_kernels(m, f) for m, f in files.items()))
    known = KEPT | REPLACED | set(EXCLUDED)
    assert found - known == set(), f"unclassified Triton kernels: {sorted(found - known)}"
    assert known - found == set(), f"classified kernels no longer in vLLM: {sorted(known - found)}"
    assert not (KEPT | REPLACED) & set(EXCLUDED)
