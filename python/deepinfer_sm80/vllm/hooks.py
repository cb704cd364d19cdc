"""Worker-side replacements that no subclass reaches: the DeepGEMM scheduling-metadata stub,
the Engram lookup kernel (through vLLM's Triton kernel registry) and the mHC module globals.

Each target's parameters were checked against the snapshot by register() before this runs.
"""
import torch

from . import _snapshot as S


def paged_mqa_logits_metadata_stub(context_lens, block_size, num_sms, indices=None):
    """DeepGEMM's paged-logits scheduling metadata, which only DeepGEMM's (replaced) logits kernel
    reads: zeros of the shape the metadata builder copies ([num_sms + 1, 2] int32)."""
    return torch.zeros((num_sms + 1, 2), dtype=torch.int32, device=context_lens.device)


def engram_lookup_impl(weight, scales, ids, sorted_dst, out, vocab_start, vocab_end, num_rows, ids_stride_t,
                       ids_stride_h, **kw):
    """vLLM's _engram_lookup_kernel launch as libdsv4's engram_lookup: rows = tokens x local heads,
    dequantized to bf16. The grid is not passed; sizes come from num_rows and LOCAL_HEADS."""
    if kw.get("SORTED") or kw.get("PACKED") or kw.get("PEER_ROWS", 0):
        raise NotImplementedError("deepinfer_sm80: Engram lookup with SORTED, PACKED or PEER_ROWS (sorted host "
                                  "tables, packed staging, NVLink-split tables) has no SM8x path")
    local_heads = int(kw["LOCAL_HEADS"])
    dim = int(kw["DIM"])
    if int(kw["QUANT_BLOCK"]) != 32:
        raise NotImplementedError(f"deepinfer_sm80: Engram quant block {kw['QUANT_BLOCK']} (libdsv4 reads 32)")
    tokens = int(num_rows) // local_heads
    del sorted_dst, ids_stride_t, ids_stride_h  # the strides come with the ids tensor itself
    if ids.dtype != torch.int32:
        ids = ids.to(torch.int32)
    from .. import ops

    ops.engram_lookup(weight.view(torch.uint8), scales.view(torch.uint8), ids[:tokens],
                      out.view(-1)[: tokens * local_heads * dim].view(tokens, local_heads, dim),
                      head_start=int(kw["HEAD_START"]), vocab_start=int(vocab_start), vocab_end=int(vocab_end))


def install(off):
    """Install what `off` (names of DEEPINFER_DISABLE_OPS) leaves on; return one line per item."""
    done = []
    meta = S.resolve(S.M_INDEXER_META)
    meta.get_paged_mqa_logits_metadata = paged_mqa_logits_metadata_stub
    done.append(f"{S.M_INDEXER_META}.get_paged_mqa_logits_metadata: stub")
    if "engram" not in off:
        from vllm.triton_utils.dispatcher import register_kernels

        name = f"{S.M_ENGRAM}._engram_lookup_kernel"
        register_kernels({name: engram_lookup_impl})
        done.append(f"{name}: engram_lookup")
    if "mhc" not in off:
        from . import mhc

        for module, names in ((S.M_MODEL, mhc.MODEL_GLOBALS), (S.M_DSPARK, mhc.DSPARK_GLOBALS)):
            mod = S.resolve(module)
            for name in names:
                setattr(mod, name, getattr(mhc, name))
                done.append(f"{module}.{name}: {mhc.OPS[name]}")
    return done
