"""What the plugin expects of vLLM: the tested versions, the parameters of every function and
method it hooks, and the argument tuples of the Triton kernels it overrides or compiles.

`drift()` compares the installed vLLM against this snapshot by parameter names and kinds
(annotations may differ) and returns one line per difference; it imports vLLM modules but
touches no GPU. Everything here is data so the CPU tests can check the same table.
"""
import importlib
import inspect

TESTED_VERSIONS = ("0.33.0",)
# Another 0.33.x is accepted only when drift() finds nothing.
ACCEPTED_SERIES = "0.33."

_POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
_KW = inspect.Parameter.KEYWORD_ONLY

M_MODEL = "vllm.models.deepseek_v41.nvidia.model"
M_DSPARK = "vllm.models.deepseek_v41.nvidia.dspark"
M_ATTN = "vllm.models.deepseek_v41.attention"
M_FLASHMLA = "vllm.models.deepseek_v41.nvidia.flashmla"
M_INDEXER_OP = "vllm.model_executor.layers.sparse_attn_indexer"
M_COMPRESSOR = "vllm.models.deepseek_v41.compressor"
M_INDEXER_META = "vllm.v1.attention.backends.mla.indexer"
M_ENGRAM = "vllm.models.deepseek_v41.common.engram"
M_WRITER = "vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache"
M_KSTORE = "vllm.models.deepseek_v41.common.ops.indexer_k_store"


def _p(*names, kw=()):
    """A parameter list: names (a trailing '=' marks a default, which is not compared)."""
    return tuple((n.rstrip("="), _POS) for n in names) + tuple((n.rstrip("="), _KW) for n in kw)


# target "module:qualname" -> parameters (name, kind) of vLLM 0.33.0.
SIGNATURES = {
    f"{M_MODEL}:_select_dsv4_attn_cls": _p("vllm_config"),
    f"{M_ATTN}:DeepseekV4Attention.__init__": _p("self", "vllm_config", "prefix", "topk_indices_buffer",
                                                 "aux_stream_list", "candidate_block_buffer"),
    f"{M_ATTN}:DeepseekV4Attention.forward_mqa": _p("self", "q", "kv", "positions", "output"),
    f"{M_ATTN}:DeepseekV4Attention._o_proj": _p("self", "attn_out", "positions"),
    f"{M_ATTN}:DeepseekV4Attention._indexer_cls": _p("self", "k_cache"),
    f"{M_ATTN}:DeepseekV4Attention._fused_qnorm_rope_kv_insert": _p("self", "q", "kv", "positions", "attn_metadata"),
    f"{M_ATTN}:DeepseekV4Attention.get_padded_num_q_heads": _p("num_heads"),
    f"{M_FLASHMLA}:DeepseekV4FlashMLAAttention._forward_decode": _p("self", "q", "kv_cache", "swa_metadata",
                                                                    "attn_metadata", "swa_only", "output"),
    f"{M_FLASHMLA}:DeepseekV4FlashMLAAttention._forward_prefill": _p("self", "q", "positions", "compressed_k_cache",
                                                                     "swa_k_cache", "output", "attn_metadata",
                                                                     "swa_metadata"),
    f"{M_ATTN}:DeepseekV4Indexer.__init__": _p(
        "self", "vllm_config", "config", "hidden_size", "q_lora_rank", "quant_config", "cache_config",
        "topk_indices_buffer", "compress_ratio", "prefix",
        kw=("owns_k", "k_cache", "main_head_dim", "candidate_block_buffer", "candidate_block_size",
            "candidate_write")),
    f"{M_ATTN}:DeepseekV4Indexer.forward_q": _p("self", "qr", "qr_scale", "indexer_weights", "positions",
                                               "rotary_emb"),
    f"{M_ATTN}:DeepseekV4Indexer._produce_k": _p("self", "latent", "positions", "rotary_emb"),
    f"{M_INDEXER_OP}:SparseAttnIndexer.__init__": _p(
        "self", "k_cache", "quant_block_size", "scale_fmt", "topk_tokens", "head_dim", "max_model_len",
        "max_total_seq_len", "topk_indices_buffer", "skip_k_cache_insert", "use_fp4_cache", "compress_ratio",
        "candidate_blocks", "candidate_block_size", "candidate_write"),
    f"{M_INDEXER_OP}:SparseAttnIndexer.forward_cuda": _p("self", "hidden_states", "q_quant", "k", "weights"),
    f"{M_COMPRESSOR}:DeepseekCompressor.forward": _p("self", "kv_score", "positions"),
    f"{M_COMPRESSOR}:DeepseekCompressor.insert_cache": _p("self", "latent", "positions", "rotary_emb"),
    f"{M_INDEXER_META}:get_paged_mqa_logits_metadata": _p("context_lens", "block_size", "num_sms", "indices"),
    f"{M_ENGRAM}:ParallelEngramEmbedding.lookup": _p("self", "indices", "out", "background"),
    f"{M_MODEL}:mhc_pre_delayed_tilelang": _p(
        "residual", "fn", "hc_scale", "hc_base", "rms_eps", "hc_pre_eps", "hc_sinkhorn_eps", "hc_post_mult_value",
        "sinkhorn_repeat", "pre_mix", "x", "norm_weight", "norm_eps"),
    f"{M_MODEL}:mhc_shifted_post_pre": _p(
        "x", "residual", "post_layer_mix", "comb_res_mix", "fn", "hc_scale", "hc_base", "rms_eps", "hc_pre_eps",
        "hc_sinkhorn_eps", "hc_post_mult_value", "sinkhorn_repeat", "pre_mix", "norm_weight", "norm_eps",
        "capture_aux", kw=("stream", "reduce_results")),
    f"{M_MODEL}:mhc_post_tilelang": _p("x", "residual", "post_layer_mix", "comb_res_mix"),
    f"{M_MODEL}:hc_collapse_triton": _p("x", "pre_mix"),
    f"{M_DSPARK}:mhc_post_tilelang": _p("x", "residual", "post_layer_mix", "comb_res_mix"),
    f"{M_DSPARK}:hc_collapse_triton": _p("x", "pre_mix"),
}

# Kernels overridden through vllm.triton_utils.dispatcher.register_kernels: argument names in
# launch order (the override receives them positionally in this order).
KERNEL_ARGS = {
    f"{M_ENGRAM}._engram_lookup_kernel": (
        "weight", "scales", "ids", "sorted_dst", "out", "vocab_start", "vocab_end", "num_rows", "ids_stride_t",
        "ids_stride_h", "HEAD_START", "LOCAL_HEADS", "TOTAL_HEADS", "DIM", "QUANT_BLOCK", "BLOCK_R", "GRID",
        "SORTED", "PACKED", "OUT_STRIDE", "PEER_ROWS"),
}

# Kernels the SM8x path no longer launches (replaced by libdsv4); the compile gate checks that
# exactly these fail to build for sm_80, and the drift guard that each still exists by name.
REPLACED_KERNELS = {
    f"{M_WRITER}._rope_quant_insert_kernel": (
        "latent", "positions", "cos_sin", "cache", "cache_slots", "COS_STRIDE", "CACHE_STRIDE", "CACHE_BLOCK",
        "COMPRESS_RATIO", "SANITIZE_CACHE_NANS"),
    f"{M_KSTORE}._indexer_k_norm_rope_quant_store_kernel": (
        "k_pre_ptr", "k_pre_stride", "positions_ptr", "rms_norm_weight_ptr", "rms_norm_eps", "cos_sin_cache_ptr",
        "cos_sin_stride", "k_cache_ptr", "kv_slot_mapping_ptr", "kv_cache_block_size", "HEAD_SIZE", "ROPE_HEAD_DIM",
        "COMPRESS_RATIO", "TOKEN_STRIDE", "SCALE_DIM", "KV_BLOCK_STRIDE", "FP8_MAX", "USE_FP4", "MX_SCALE",
        "SHUFFLE", "BLOCK_TILE_SIZE", "HEAD_TILE_SIZE"),
    **KERNEL_ARGS,
}


def resolve(target):
    """The object named "module:qualname" (or "module.attr")."""
    if ":" in target:
        module, qual = target.split(":")
    else:
        module, qual = target.rsplit(".", 1)
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def parameters(fn):
    return tuple((p.name, p.kind) for p in inspect.signature(fn).parameters.values())


def _kernel_args(kernel):
    from vllm.triton_utils.dispatcher import _kernel_arg_names

    return tuple(_kernel_arg_names(kernel))


def drift():
    """One line per target whose name, parameters or kernel arguments differ from the snapshot."""
    out = []
    for target, want in SIGNATURES.items():
        try:
            have = parameters(resolve(target))
        except Exception as e:  # a missing module or attribute is drift, reported by name
            out.append(f"{target}: missing ({type(e).__name__}: {e})")
            continue
        if have != want:
            out.append(f"{target}: parameters {[n for n, _ in have]} differ from {[n for n, _ in want]}")
    for name, want in REPLACED_KERNELS.items():
        try:
            have = _kernel_args(resolve(name))
        except Exception as e:
            out.append(f"{name}: missing ({type(e).__name__}: {e})")
            continue
        if have != want:
            out.append(f"{name}: kernel arguments {list(have)} differ from {list(want)}")
    return out


def version_problem(version):
    """None for a tested version; a sentence for a refused one (checked again by drift())."""
    if version in TESTED_VERSIONS:
        return None
    if version.startswith(ACCEPTED_SERIES):
        return None
    return (f"vLLM {version} is not supported (tested: {', '.join(TESTED_VERSIONS)}); "
            f"install vllm=={TESTED_VERSIONS[-1]} or set DEEPINFER_DISABLE=1")
