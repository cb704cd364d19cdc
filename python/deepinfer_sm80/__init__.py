"""deepinfer_sm80: Python binding of libdsv4 (DeepSeek-V4.1 operators for Ampere GPUs).

A thin layer: it loads the C library with ctypes, turns tensors into descriptors, passes
torch's current CUDA stream, and maps status codes to exceptions carrying the library's
message. CUDA tensors run the kernels; CPU tensors and numpy arrays run the C references.
Every operator takes torch tensors or numpy arrays (bf16 on numpy: uint16 bit patterns).
"""
from ._lib import Dsv4Error, NoDeviceError
from .attention import sparse_mla_decode, sparse_mla_decode_plan, sparse_mla_prefill, sparse_mla_prefill_plan
from .compressor import compress, compress_v4, engram_lookup, inv_rope
from .device import device_count, device_query, version
from .indexer import indexer_k_store, indexer_logits, indexer_q, indexer_topk
from .indices import combine_cols, combine_topk_swa, decode_swa_indices, topk_translate, topk_translate_packed
from .kvcache import kv_gather, kv_insert, kv_rope_insert, kv_swa_write
from .mhc import (gate_params, mhc_collapse, mhc_fn_bcast, mhc_fn_split, mhc_gates, mhc_plan, mhc_post, mhc_pre,
                  mhc_seam)
from .plan import plan

__all__ = [
    "Dsv4Error", "NoDeviceError", "device_count", "device_query", "version",
    "kv_insert", "kv_swa_write", "kv_gather", "kv_rope_insert",
    "topk_translate", "topk_translate_packed", "combine_cols", "combine_topk_swa", "decode_swa_indices",
    "sparse_mla_decode", "sparse_mla_decode_plan", "sparse_mla_prefill", "sparse_mla_prefill_plan",
    "gate_params", "mhc_post", "mhc_collapse", "mhc_gates", "mhc_pre", "mhc_seam", "mhc_fn_bcast", "mhc_fn_split",
    "mhc_plan", "plan", "compress", "compress_v4", "inv_rope", "engram_lookup", "indexer_q", "indexer_k_store",
    "indexer_topk", "indexer_logits",
]
