"""The sparse MLA compositions of a V4.1 attention layer, as plain functions over tensors: decode
rows, one prefill chunk, the grouped output projection. AttentionBlock's stages and the vLLM
plugin's attention layer both call them.

Each takes plain tensors, explicit sizes and caller-owned output buffers and allocates nothing
(CUDA-graph safe); metadata a caller already built (translated top-k lists, SWA lists, gathered
slab rows, the combined index matrix) is passed in and not rebuilt, so that a layer stack builds
it once per sharing group. Shapes: T rows, H (padded) query heads, 512 = head dim; caches are
uint8 pages of fp8_ds_mla records.
"""
import torch

from .. import ops


# ---- decode rows -------------------------------------------------------------------------------
def translate_decode_topk(topk_indices, token_to_req, block_table, is_valid_token, ids, lens, *, page_tokens):
    """The compressed list of each decode row: local top-k entries -> global cache slots.

    topk_indices: int32 [T, K] (local compressed positions, -1 none); token_to_req: int32 [T];
    block_table: int32 [R, width] (compressed cache); is_valid_token: bool/uint8 [T];
    ids: int32 [T, K] and lens: int32 [T], written; page_tokens: compressed entries per page."""
    ops.topk_translate(topk_indices, token_to_req, block_table, is_valid_token, ids, lens, page_tokens=page_tokens)


def decode_attention(q, swa_cache, swa_ids, swa_lens, out, workspace, sink=None, *, swa_page_tokens, scale=0.0,
                     comp_cache=None, comp_ids=None, comp_lens=None, comp_page_tokens=None, topk_indices=None,
                     token_to_req=None, comp_block_table=None, is_valid_token=None, **decode_kw):
    """Sparse MLA of decode rows over their SWA list, then their compressed list (if comp_cache).

    q: bf16 [T, H, 512]; swa_cache: uint8 SWA pages (swa_page_tokens slots each); swa_ids: int32
    [T, W] global slots and swa_lens: int32 [T] (decode SWA lists); out: bf16 [T, H, 512],
    written; workspace: uint8 (Planner.sparse_mla_decode for T, with the same decode_kw:
    num_splits, sm_count, ...); sink: fp32 [H] or None; scale: 0 = the library's default.
    comp_cache: uint8 compressed pages (comp_page_tokens entries each) or None (SWA-only layer);
    comp_ids: int32 [T, K] and comp_lens: int32 [T], the translated lists. With topk_indices
    (int32 [T, K] local), token_to_req (int32 [T]), comp_block_table (int32 [R, width]) and
    is_valid_token ([T]) given, comp_ids / comp_lens are written first (translate_decode_topk)."""
    if topk_indices is not None:
        translate_decode_topk(topk_indices, token_to_req, comp_block_table, is_valid_token, comp_ids, comp_lens,
                              page_tokens=comp_page_tokens)
    extra = {}
    if comp_cache is not None:
        extra = dict(extra_cache=comp_cache, extra_ids=comp_ids, extra_lens=comp_lens,
                     extra_page_tokens=comp_page_tokens)
    ops.sparse_mla_decode(q, swa_cache, swa_ids, swa_lens, out, workspace, sink=sink,
                          main_page_tokens=swa_page_tokens, scale=scale, **extra, **decode_kw)


# ---- prefill chunks ----------------------------------------------------------------------------
# A chunk of R requests attends over a bf16 slab [R, M, 512]: row b holds request b's compressed
# entries in rows [0, N) (N = the chunk's largest seq_len // ratio; 0 for SWA-only layers) and
# its last gather_lens[b] positions from row N on; the combined index matrix names slab rows.
def gather_compressed_rows(comp_cache, comp_seq_lens, comp_block_table, slab, *, page_tokens):
    """Dequantize request b's comp_seq_lens[b] compressed entries into slab[b, 0:comp_seq_lens[b]].

    comp_cache: uint8 pages (page_tokens entries each); comp_seq_lens: int32 [R] (seq_len // ratio);
    comp_block_table: int32 [R, width]; slab: bf16 [>= R, M, 512], those rows written."""
    ops.kv_gather(comp_cache, comp_seq_lens, comp_block_table, slab, page_tokens=page_tokens, offset=0)


def gather_swa_rows(swa_cache, seq_lens, swa_block_table, gather_lens, slab, *, page_tokens, row0):
    """Dequantize request b's last gather_lens[b] positions into slab[b, row0:row0 + gather_lens[b]].

    swa_cache: uint8 SWA pages (page_tokens slots each); seq_lens, gather_lens: int32 [R];
    swa_block_table: int32 [R, width]; slab: bf16 [>= R, M, 512], those rows written."""
    ops.kv_gather(swa_cache, seq_lens, swa_block_table, slab, gather_lens, page_tokens=page_tokens, offset=row0)


def chunk_indices(topk_indices, query_start_loc, seq_lens, gather_lens, combined, combined_lens, *, topk, window,
                  ratio, slab_rows, swa_row0):
    """The combined index matrix of a chunk's T query rows: top-k slab rows, then the window.

    topk_indices: int32 [T, >= topk] or None (ratio 0); query_start_loc: int32 [R+1] (absolute
    offsets, its first entry the chunk's first row); seq_lens, gather_lens: int32 [R]; combined:
    int32 [T, >= combine_cols(topk, window)] and combined_lens: int32 [T], written; slab_rows: M;
    swa_row0: N."""
    ops.combine_topk_swa(topk_indices, query_start_loc, seq_lens, gather_lens, combined, combined_lens, topk=topk,
                         window=window, ratio=ratio, slab_rows=slab_rows, swa_row0=swa_row0)


def prefill_chunk_attention(q, slab, combined, combined_lens, out, sink=None, *, scale=0.0, swa_row0=0,
                            comp_cache=None, comp_seq_lens=None, comp_block_table=None, comp_page_tokens=None,
                            swa_cache=None, seq_lens=None, swa_block_table=None, gather_lens=None,
                            swa_page_tokens=None, query_start_loc=None, topk_indices=None, topk=0, window=0,
                            ratio=0):
    """Sparse MLA of one prefill chunk's T rows over its slab, building what is not built yet.

    q: bf16 [T, H, 512]; slab: bf16 [R, M, 512]; combined: int32 [T, C] and combined_lens: int32
    [T]; out: bf16 [T, H, 512], written; sink: fp32 [H] or None; scale: 0 = the library's default.
    In order, each only when its inputs are given (otherwise the caller built it):
    comp_cache -> gather_compressed_rows (rows [0, swa_row0)); swa_cache -> gather_swa_rows (rows
    from swa_row0; needs seq_lens, swa_block_table, gather_lens); query_start_loc -> chunk_indices
    into combined / combined_lens (topk_indices, topk, window, ratio; slab_rows = M)."""
    if comp_cache is not None:
        gather_compressed_rows(comp_cache, comp_seq_lens, comp_block_table, slab, page_tokens=comp_page_tokens)
    if swa_cache is not None:
        gather_swa_rows(swa_cache, seq_lens, swa_block_table, gather_lens, slab, page_tokens=swa_page_tokens,
                        row0=swa_row0)
    if query_start_loc is not None:
        chunk_indices(topk_indices, query_start_loc, seq_lens, gather_lens, combined, combined_lens, topk=topk,
                      window=window, ratio=ratio, slab_rows=slab.shape[1], swa_row0=swa_row0)
    ops.sparse_mla_prefill(q, slab, combined, combined_lens, out, sink, scale=scale)


# ---- output projection -------------------------------------------------------------------------
def grouped_o_proj(o, wo_a, out, *, num_heads=None):
    """The grouped first half of the o-projection: out[t, g] = o[t, heads of group g] @ wo_a[g].

    o: bf16 [T, Hpad, 512] (after inverse RoPE), its first num_heads (default Hpad) heads live,
    split into G = wo_a.shape[0] groups of consecutive heads; wo_a: bf16 [G, heads/G * 512, rank]
    (any strides); out: bf16 [T, G, rank] contiguous, written (one strided batched GEMM)."""
    T, G = o.shape[0], wo_a.shape[0]
    heads = o[:, :num_heads or o.shape[1]].view(T, G, -1)
    torch.bmm(heads.transpose(0, 1), wo_a, out=out.transpose(0, 1))
