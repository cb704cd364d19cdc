"""The SM8x DeepSeek-V4.1 attention layer: vLLM 0.33.0's FlashMLA layer with every kernel that
cannot run on Ampere replaced by a libdsv4 torch op (namespace dsv4).

Subclassing DeepseekV4FlashMLAAttention keeps its constructor and its forward_mqa (profile
run, prefill/decode split, metadata lookup); the hooks below replace the kernels. The SWA
writer (`_fused_qnorm_rope_kv_insert`, vLLM's CUDA op) is kept: it has SM80/SM86 code.
Decode rows, prefill chunks and the grouped wo_a GEMM are the compositions of
`deepinfer_sm80.layer.attend` (shared with the vLLM-free layer); the hooks here only map vLLM's
metadata and workspaces onto their tensors.
Every call launches on torch's current stream and allocates only through torch or vLLM's
workspace manager.
"""
import torch
from vllm.forward_context import get_forward_context
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.layers.sparse_attn_indexer import SparseAttnIndexer
from vllm.models.deepseek_v41.attention import DeepseekV4Indexer
from vllm.models.deepseek_v41.compressor import DeepseekCompressor
from vllm.models.deepseek_v41.nvidia.flashmla import (DeepseekSparseSWAFlashMLABackend,
                                                      DeepseekSparseSWAFlashMLAMetadataBuilder,
                                                      DeepseekV4FlashMLAAttention)
from vllm.models.deepseek_v41.sparse_mla import DeepseekV4FlashMLABackend
from vllm.v1.worker.workspace import current_workspace_manager

from .. import ops
from ..layer.attend import decode_attention, grouped_o_proj, prefill_chunk_attention
from ..planner import Planner
from .scoring import indexer_topk

HEAD_DIM = 512
# sparse MLA needs at least 16 query heads a CTA; the CUDA SWA writer pads to 8/16/32/64/128.
_PADDED_HEADS = (16, 32, 64, 128)
_DECODE_WS = {}


class DeepInferV41Backend(DeepseekV4FlashMLABackend):
    """The FlashMLA backend's builder and block sizes, declared for SM8x."""

    @staticmethod
    def get_name():
        return "DEEPINFER_SM80_DSV41"

    @classmethod
    def supports_compute_capability(cls, capability):
        return capability.major >= 8


class DeepInferSWAMetadataBuilder(DeepseekSparseSWAFlashMLAMetadataBuilder):
    def build_tile_scheduler(self, num_decode_tokens):
        # FlashMLA's planner objects; libdsv4 plans its own split-KV (and _flashmla_C may be absent).
        return {key: None for key in ("swaonly", "c4a", "c128a", "c1a", "c2a")}


class DeepInferSWABackend(DeepseekSparseSWAFlashMLABackend):
    @staticmethod
    def get_builder_cls():
        return DeepInferSWAMetadataBuilder


def _decode_workspace_bytes(tokens, heads, extra_width, extra_page_tokens):
    """sparse_mla_decode's scratch bytes for T in `tokens` (SWA list 128 wide, 32-token pages)."""
    p = Planner()
    return p.sparse_mla_decode(tokens, heads, main_width=128, main_page_tokens=32, extra_width=extra_width,
                               extra_page_tokens=extra_page_tokens if extra_width else None)


class DeepInferV41Attention(DeepseekV4FlashMLAAttention):
    """DeepSeek-V4.1 sparse MLA on SM80/SM86 through libdsv4."""

    backend_cls = DeepInferV41Backend
    swa_backend_cls = DeepInferSWABackend

    def __init__(self, vllm_config, *args, **kwargs):
        super().__init__(vllm_config, *args, **kwargs)
        # The caches are bound after construction; the page geometry is known now.
        self._compressed_page_tokens = vllm_config.cache_config.block_size // max(self.compress_ratio, 1)
        if self.compressor is not None:
            self.compressor.__class__ = DeepInferCompressor
        if self.indexer is not None and isinstance(self.indexer.indexer_op, DeepInferSparseAttnIndexer):
            # The scoring op takes each token's request and position from this layer's SWA metadata.
            self.indexer.indexer_op.swa_prefix = self.swa_cache_layer.prefix
        # libdsv4's prefill runs every padded head (the sink is -inf on the padding).
        self._prefill_num_heads = self.padded_heads

    @classmethod
    def get_padded_num_q_heads(cls, num_heads):
        for h in _PADDED_HEADS:
            if num_heads <= h:
                return h
        raise ValueError(f"deepinfer_sm80: {num_heads} query heads per rank (at most 128)")

    def _indexer_cls(self, k_cache):
        return DeepInferIndexer

    # ---- workspaces ------------------------------------------------------------------------------
    def _extra_geometry(self):
        """(top-k width, states per compressed page) of this layer's compressed list, (0, 0) if none."""
        if self.compress_ratio == 0:
            return 0, 0
        return self.topk_indices_buffer.shape[-1], self._compressed_page_tokens

    def _decode_workspace(self, num_tokens, reserve=False):
        width, pages = self._extra_geometry()
        if reserve:
            key = (self.padded_heads, width, pages, self.max_num_batched_tokens)
            if key not in _DECODE_WS:
                _DECODE_WS[key] = _decode_workspace_bytes(range(1, self.max_num_batched_tokens + 1),
                                                          self.padded_heads, width, pages)
            need = _DECODE_WS[key]
        else:
            need = _decode_workspace_bytes(num_tokens, self.padded_heads, width, pages)
        return current_workspace_manager().get_simultaneous(((max(need, 1),), torch.uint8))[0]

    def forward_mqa(self, q, kv, positions, output):
        if get_forward_context().attn_metadata is None:
            # Profile run: reserve libdsv4's decode scratch next to vLLM's prefill slab.
            self._decode_workspace(None, reserve=True)
        return super().forward_mqa(q, kv, positions, output)

    # ---- decode ----------------------------------------------------------------------------------
    def _forward_decode(self, q, kv_cache, swa_metadata, attn_metadata, swa_only, output):
        T = swa_metadata.num_decode_tokens
        R = swa_metadata.num_decodes
        comp = {}
        if not swa_only:  # the compressed lists: the shared top-k buffer translated per layer
            K = self.topk_indices_buffer.shape[-1]
            comp = dict(comp_cache=kv_cache, comp_page_tokens=kv_cache.shape[1],
                        comp_ids=torch.empty((T, K), dtype=torch.int32, device=q.device),
                        comp_lens=torch.empty((T,), dtype=torch.int32, device=q.device),
                        topk_indices=self.topk_indices_buffer[:T], token_to_req=swa_metadata.token_to_req_indices[:T],
                        comp_block_table=attn_metadata.block_table[:R], is_valid_token=swa_metadata.is_valid_token[:T])
        swa_cache = self.swa_cache_layer.kv_cache
        decode_attention(q, swa_cache, swa_metadata.decode_swa_indices[:T].reshape(T, -1),
                         swa_metadata.decode_swa_lens[:T], output, self._decode_workspace(T), self.attn_sink,
                         swa_page_tokens=swa_cache.shape[1], scale=self.scale, **comp)

    # ---- prefill ---------------------------------------------------------------------------------
    def _forward_prefill(self, q, positions, compressed_k_cache, swa_k_cache, output, attn_metadata, swa_metadata):
        swa_only = self.compress_ratio == 0
        nd = swa_metadata.num_decodes
        seq_lens = swa_metadata.prefill_seq_lens
        gather_lens = swa_metadata.prefill_gather_lens
        qsl_cpu = swa_metadata.query_start_loc_cpu
        qsl = swa_metadata.query_start_loc
        base = int(qsl_cpu[nd])
        n_prefill = swa_metadata.num_prefill_tokens
        topk = 0 if swa_only else self.topk_indices_buffer.shape[-1]
        topk_indices = None
        if not swa_only:
            topk_indices = self.topk_indices_buffer[swa_metadata.num_decode_tokens:][:n_prefill]
        cols = round_up(topk + self.window_size, 128)
        plan = swa_metadata.get_prefill_chunk_plan(compress_ratio=self.compress_ratio,
                                                   prefill_chunk_size=self.PREFILL_CHUNK_SIZE,
                                                   has_compressed=not swa_only)
        manager = current_workspace_manager()
        for start, end, N, M in plan:
            size = end - start
            slab, combined, combined_lens = manager.get_simultaneous(
                ((size, M, HEAD_DIM), torch.bfloat16), ((self.max_num_batched_tokens, cols), torch.int32),
                ((self.max_num_batched_tokens,), torch.int32))
            slab = slab[:size]
            comp = {}
            if not swa_only:
                comp = dict(comp_cache=compressed_k_cache, comp_seq_lens=seq_lens[start:end] // self.compress_ratio,
                            comp_block_table=attn_metadata.block_table[nd + start:nd + end],
                            comp_page_tokens=compressed_k_cache.shape[1])
            q0 = int(qsl_cpu[nd + start]) - base
            q1 = int(qsl_cpu[nd + end]) - base
            rows = q1 - q0
            # Every part per chunk: vLLM builds no slab or combined matrix to share between layers.
            prefill_chunk_attention(q[q0:q1], slab, combined[:rows], combined_lens[:rows], output[q0:q1],
                                    self.attn_sink, scale=self.scale, swa_row0=N, swa_cache=swa_k_cache,
                                    seq_lens=seq_lens[start:end],
                                    swa_block_table=swa_metadata.block_table[nd + start:nd + end],
                                    gather_lens=gather_lens[start:end], swa_page_tokens=swa_k_cache.shape[1],
                                    query_start_loc=qsl[nd + start:nd + end + 1],
                                    topk_indices=None if swa_only else topk_indices[q0:q1], topk=topk,
                                    window=self.window_size, ratio=self.compress_ratio, **comp)

    # ---- output projection -------------------------------------------------------------------------
    def _o_proj(self, attn_out, positions):
        """Inverse RoPE in place on the live heads, then wo_a per group (bf16 bmm) and wo_b."""
        weight = self.wo_a.weight
        if weight.dtype != torch.bfloat16:
            raise NotImplementedError(f"deepinfer_sm80: wo_a in {weight.dtype}; the SM8x path needs bf16 wo_a "
                                      "(vLLM's MXFP8 emulation dequantizes it when loading on SM8x)")
        T = attn_out.shape[0]
        ops.inv_rope(attn_out, positions, self.rotary_emb.cos_sin_cache, num_heads=self.n_local_heads)
        G = self.n_local_groups
        z = torch.empty((T, G, self.o_lora_rank), dtype=torch.bfloat16, device=attn_out.device)
        grouped_o_proj(attn_out, weight.view(G, self.o_lora_rank, -1).transpose(1, 2), z, num_heads=self.n_local_heads)
        return self._wo_b_proj(z.flatten(1))


def round_up(x, m):
    return (x + m - 1) // m * m


class DeepInferSparseAttnIndexer(SparseAttnIndexer):
    """The indexer's scoring op (logits over the paged key cache + top-k) on libdsv4.

    SparseAttnIndexer's constructor is skipped on purpose: it requires DeepGEMM and registers an
    fp8 Triton warm-up that does not compile for sm_80. Same arguments, same attributes."""

    def __init__(self, k_cache, quant_block_size, scale_fmt, topk_tokens, head_dim, max_model_len,
                 max_total_seq_len, topk_indices_buffer, skip_k_cache_insert=False, use_fp4_cache=False,
                 compress_ratio=1, candidate_blocks=None, candidate_block_size=0, candidate_write=False):
        CustomOp.__init__(self)
        if use_fp4_cache:
            raise NotImplementedError("deepinfer_sm80: the MXFP4 indexer cache has no SM8x path; leave "
                                      "attention_config.indexer_kv_dtype at fp8")
        self.k_cache = k_cache
        self.quant_block_size = quant_block_size
        self.scale_fmt = scale_fmt
        self.topk_tokens = topk_tokens
        self.head_dim = head_dim
        self.max_model_len = max_model_len
        self.max_total_seq_len = max_total_seq_len
        self.topk_indices_buffer = topk_indices_buffer
        self.skip_k_cache_insert = skip_k_cache_insert
        self.use_fp4_cache = use_fp4_cache
        self.compress_ratio = compress_ratio
        self.candidate_blocks = candidate_blocks
        self.candidate_block_size = candidate_block_size
        self.candidate_write = candidate_write
        self.dense_mha_metadata_layer_name = ""
        self.swa_prefix = None  # set by DeepInferV41Attention

    def forward_native(self, hidden_states, q_quant, k, weights):
        return self.forward_cuda(hidden_states, q_quant, k, weights)

    def forward_cuda(self, hidden_states, q_quant, k, weights):
        return indexer_topk(self, q_quant, weights)


class DeepInferIndexer(DeepseekV4Indexer):
    """Query prep and key store on libdsv4 (fp8 indexer cache only); upstream's forward keeps
    its short-context branch (every candidate selected, an integer Triton kernel)."""

    attn_cls = DeepInferSparseAttnIndexer

    def forward_q(self, qr, qr_scale, indexer_weights, positions, rotary_emb):
        q = self._wq_b_proj(qr, qr_scale).view(-1, self.n_head, self.head_dim)
        T = q.shape[0]
        q8 = torch.empty((T, self.n_head, self.head_dim), dtype=torch.uint8, device=q.device)
        w = torch.empty((T, self.n_head), dtype=torch.float32, device=q.device)
        if indexer_weights.dtype != torch.bfloat16:
            indexer_weights = indexer_weights.to(torch.bfloat16)
        ops.indexer_q(q, indexer_weights, positions, rotary_emb.cos_sin_cache, q8, w,
                      softmax_scale=self.softmax_scale, head_scale=self.n_head ** -0.5)
        return q8.view(torch.float8_e4m3fn), None, w

    def _produce_k(self, latent, positions, rotary_emb):
        attn_metadata = get_forward_context().attn_metadata
        if not isinstance(attn_metadata, dict) or latent is None:
            return  # profile run
        slots = attn_metadata[self.k_cache.prefix].slot_mapping
        n = slots.shape[0]
        k_pre, _ = self.wk(latent)
        cache = self.k_cache.kv_cache
        ops.indexer_k_store(k_pre[:n], self.k_norm.weight, positions[:n], slots, rotary_emb.cos_sin_cache, cache,
                            page_tokens=cache.shape[1], ratio=self.compress_ratio,
                            eps=self.k_norm.variance_epsilon)


def _compress_enabled():
    from . import disabled_ops

    return "compress" not in disabled_ops()


class DeepInferCompressor(DeepseekCompressor):
    """The compressor (fp32 pooling + RMSNorm) and its compressed-cache writer on libdsv4. No new
    state: the attention layer swaps the class of vLLM's instance after construction."""

    def forward(self, kv_score, positions):
        attn_metadata = get_forward_context().attn_metadata
        if not isinstance(attn_metadata, dict):
            return None
        ring = self.state_cache.kv_cache if self.state_cache is not None else None
        packed = ring is None or (ring.stride(2) == 1 and ring.stride(1) == ring.shape[2]
                                  and ring.stride(0) == ring.shape[1] * ring.shape[2])
        if self.pcp_size > 1 or not packed or not _compress_enabled():
            # The pooling kernel is fp32 Triton and builds for sm_80: vLLM's stays where libdsv4's
            # ring layout (blocks of ring_cap contiguous rows) does not hold.
            return super().forward(kv_score, positions)
        latent = torch.empty((kv_score.shape[0], self.head_dim), dtype=torch.bfloat16, device=kv_score.device)
        if self.state_cache is None:
            slots = attn_metadata[self.k_cache_prefix].slot_mapping
            n = slots.shape[0]
            ops.compress(kv_score[:n], self.norm.weight, latent, slots, None, None, None, None, ratio=1,
                         eps=self.rms_norm_eps)
        else:
            meta = attn_metadata[self.state_cache.prefix]
            n = meta.slot_mapping.shape[0]
            ops.compress(kv_score[:n], self.norm.weight, latent, None, positions[:n], meta.slot_mapping,
                         meta.query_start_loc, ring.view(-1, ring.shape[2]), ratio=2, eps=self.rms_norm_eps,
                         ring_cap=ring.shape[1])
        return latent

    def insert_cache(self, latent, positions, rotary_emb):
        if latent is None:
            return
        attn_metadata = get_forward_context().attn_metadata
        slots = attn_metadata[self.k_cache_prefix].slot_mapping
        cache = self._static_forward_context[self.k_cache_prefix].kv_cache
        if cache.dtype != torch.uint8 or cache.shape[-1] != 584:
            raise NotImplementedError(f"deepinfer_sm80: compressed cache {cache.dtype} x {cache.shape[-1]} bytes; "
                                      "the SM8x path writes the 584-byte fp8_ds_mla record")
        n = slots.shape[0]
        ops.kv_rope_insert(latent, positions[:n], slots, rotary_emb.cos_sin_cache, cache,
                           page_tokens=cache.shape[1], ratio=self.compress_ratio)
