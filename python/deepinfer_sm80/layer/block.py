"""AttentionBlock: the attention sublayer of one DeepSeek-V4.1 decoder layer on the library.

    SWA writer -> compressor + compressed writer + index keys (kv sources) -> index queries,
    scoring and top-k (index sources) -> top-k translation / combine / decode SWA lists (YOCO)
    -> sparse MLA decode (decode rows) and gather + sparse MLA prefill (prefill chunks)
    -> inverse RoPE -> o-projection -> mHC seam (post of this site + the FFN site's gates).

Dense projections are torch bf16 GEMMs; everything else is a library op (torch.ops.dsv4). A
forward is a list
of named stages (`stages()`), so that a benchmark can time each one and capture the list.
"""
from dataclasses import dataclass

import torch

from .. import ops
from ..indices import combine_cols
from ..mhc import mhc_fn_split
from .attend import (chunk_indices, decode_attention, gather_compressed_rows, gather_swa_rows, grouped_o_proj,
                     prefill_chunk_attention, translate_decode_topk)
from .config import CANDIDATE_NONE, HEAD_DIM


@dataclass
class Stage:
    """One step of a forward: name, what it runs (dense: torch GEMMs; op: a library op;
    metadata: YOCO-shareable)."""
    name: str
    kind: str
    run: object


@dataclass
class BlockIO:
    """Inputs and outputs of a block for T tokens. In: x bf16 [T, hidden] (the attention
    input, attn_norm(collapse(R, pre))); residual bf16 [T, 4, hidden]; post fp32 [T, 4], comb
    fp32 [T, 4, 4] (this site's gates); pre_mix fp32 [T, 4] (the carried pre of the FFN
    collapse). Out: residual_out bf16 [T, 4, hidden]; post_out fp32 [T, 4], comb_out fp32
    [T, 4, 4], pre_out fp32 [T, 4] (the FFN site's gates); layer_input bf16 [T, hidden] (the
    FFN input)."""
    x: torch.Tensor
    residual: torch.Tensor
    post: torch.Tensor
    comb: torch.Tensor
    pre_mix: torch.Tensor
    residual_out: torch.Tensor
    post_out: torch.Tensor
    comb_out: torch.Tensor
    pre_out: torch.Tensor
    layer_input: torch.Tensor

    @classmethod
    def random(cls, T, hidden, *, device="cpu", gen=None):
        """Unit-scale bf16 inputs, sigmoid-like gates, poisoned (NaN) outputs."""
        gen = gen or torch.Generator().manual_seed(3)
        e = lambda *s, dt=torch.float32: torch.full(s, float("nan"), dtype=dt)  # noqa: E731
        io = cls(x=torch.randn(T, hidden, generator=gen).to(torch.bfloat16),
                 residual=torch.randn(T, 4, hidden, generator=gen).to(torch.bfloat16),
                 post=2 * torch.sigmoid(torch.randn(T, 4, generator=gen)),
                 comb=torch.rand(T, 4, 4, generator=gen) / 2,
                 pre_mix=torch.sigmoid(torch.randn(T, 4, generator=gen)) + 1e-6,
                 residual_out=e(T, 4, hidden, dt=torch.bfloat16), post_out=e(T, 4), comb_out=e(T, 4, 4),
                 pre_out=e(T, 4), layer_input=e(T, hidden, dt=torch.bfloat16))
        return cls(**{k: v.to(device) for k, v in vars(io).items()})


def capture_graph(stages):
    """A torch.cuda.CUDAGraph of the stages (a decode step of one or more blocks), after one
    warm-up run on a side stream (kernel loading, the activations' first use); replay() reruns
    them on the same buffers. Build the stage lists first: that decides the YOCO builds."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for st in stages:
            st.run()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for st in stages:
            st.run()
    torch.cuda.synchronize()
    return g


def rms_norm(x, weight, eps, out):
    """out = bf16(x * rsqrt(mean(x^2) + eps) * weight), in fp32 (vLLM's fused q/kv RMSNorm)."""
    y = x.float()
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
    out.copy_(y * weight.float())


def mm_fp32(a, b_t):
    """fp32 [M, N] = a @ b_t.T for bf16 a [M, K] and b_t [N, K] (fp32 output of bf16 GEMMs)."""
    if a.is_cuda:
        return torch.mm(a, b_t.t(), out_dtype=torch.float32)
    return a.float() @ b_t.float().t()


class AttentionBlock:
    """The attention block of decoder `layer`. weights: its LayerWeights; caches: {layer:
    LayerCaches} holding this layer's and its kv source's; plan: the LayerPlan."""

    def __init__(self, cfg, layer, weights, caches, plan):
        self.cfg, self.role, self.w, self.plan = cfg, cfg.role(layer), weights, plan
        self.own = caches[layer]
        self.src = caches[self.role.kv_source] if self.role.ratio else None
        self.cols = combine_cols(cfg.index_topk if self.role.ratio else 0, cfg.window)
        self.fn_split = mhc_fn_split(weights.fn)  # made once: the seam's tensor-core route then skips its split

    def forward(self, io, meta, state):
        """Run every stage of this block for the step (meta: StepMetadata, state: StepState)."""
        for st in self.stages(io, meta, state):
            st.run()

    def stages(self, io, meta, state):
        """The ordered list of Stage objects this layer runs for the step. Building it decides
        which YOCO metadata this layer builds (state), so build it once per layer and step."""
        cfg, role, w, plan = self.cfg, self.role, self.w, self.plan
        T, Td = meta.num_tokens, meta.num_decode_tokens
        a = plan.acts(T)
        S = []

        def add(name, kind):
            return lambda fn: S.append(Stage(name, kind, fn))

        @add("q_kv_proj", "dense")
        def _():
            ql = cfg.q_lora_rank
            torch.mm(io.x, w.wqa_wkv.t(), out=a["qkv"])
            rms_norm(a["qkv"][:, :ql], w.q_norm, cfg.rms_norm_eps, a["qr"])
            rms_norm(a["qkv"][:, ql:], w.kv_norm, cfg.rms_norm_eps, a["kv"])
            torch.mm(a["qr"], w.wq_b.t(), out=a["q"].view(T, -1))

        @add("kv_swa_write", "op")
        def _():
            ops.kv_swa_write(a["q"], a["kv"], meta.positions, meta.swa_slot_mapping, w.cos_sin, self.own.swa,
                             page_tokens=cfg.swa_page_tokens, skip_q_norm=True)

        if role.owns_kv:
            self._kv_source_stages(add, io, meta, a)
        if role.owns_indexer:
            self._indexer_stages(add, io, meta, a)
        self._metadata_stages(add, meta, state)
        if Td:
            self._decode_stages(add, meta, a)
        if T > Td:
            self._prefill_stages(add, meta, state, a)

        @add("inv_rope", "op")
        def _():
            ops.inv_rope(a["o"], meta.positions, w.cos_sin)

        @add("o_proj", "dense")
        def _():
            grouped_o_proj(a["o"], w.wo_a, a["oa_flat"].view(T, cfg.o_groups, -1))
            torch.mm(a["oa_flat"], w.wo_b.t(), out=a["x_attn"])

        @add("mhc_seam", "op")
        def _():
            ops.mhc_seam(a["x_attn"], io.residual, io.post, io.comb, w.fn, w.scale, w.base, io.residual_out,
                         io.post_out, io.comb_out, io.pre_out, io.layer_input, plan.workspace, io.pre_mix,
                         w.ffn_norm, None, None, self.fn_split)
        return S

    # ---- kv source: compressor, compressed writer, index keys -------------------------------------
    def _kv_source_stages(self, add, io, meta, a):
        cfg, r, w, src = self.cfg, self.role.ratio, self.w, self.own
        T, P = meta.num_tokens, cfg.comp_page_tokens(self.role.ratio)
        slots = meta.comp_slot_mapping[r]
        kv_score = a["kv_score"][:T * HEAD_DIM * r].view(T, HEAD_DIM * r)

        @add("compressor_proj", "dense")
        def _():
            kv_score.copy_(mm_fp32(io.x, w.wc))

        @add("compress", "op")
        def _():
            if r == 1:
                ops.compress(kv_score, w.c_norm, a["latent"], slots, None, None, None, None, ratio=1,
                             eps=cfg.rms_norm_eps)
            else:
                ops.compress(kv_score, w.c_norm, a["latent"], None, meta.positions, meta.ring_slot,
                             meta.query_start_loc, src.ring, ratio=2, eps=cfg.rms_norm_eps, ring_cap=cfg.ring_cap)

        @add("kv_rope_insert", "op")
        def _():
            ops.kv_rope_insert(a["latent"], meta.positions, slots, w.cos_sin, src.comp, page_tokens=P, ratio=r)

        @add("indexer_k_proj", "dense")
        def _():
            torch.mm(a["latent"], w.wk.t(), out=a["k_pre"])

        @add("indexer_k_store", "op")
        def _():
            ops.indexer_k_store(a["k_pre"], w.k_norm, meta.positions, slots, w.cos_sin, src.idx, page_tokens=P,
                                ratio=r, eps=cfg.rms_norm_eps)

    # ---- index source: queries, scoring, top-k --------------------------------------------------
    def _indexer_stages(self, add, io, meta, a):
        cfg, role, w = self.cfg, self.role, self.w
        T = meta.num_tokens

        @add("indexer_q_proj", "dense")
        def _():
            torch.mm(a["qr"], w.wq_idx.t(), out=a["q_idx"].view(T, -1))
            torch.mm(io.x, w.w_proj.t(), out=a["w_raw"])

        @add("indexer_q", "op")
        def _():
            ops.indexer_q(a["q_idx"], a["w_raw"], meta.positions, w.cos_sin, a["q8"], a["w"])

        @add("indexer_topk", "op")
        def _():
            cand = meta.candidate_buffer[:T] if role.candidate_mode != CANDIDATE_NONE else None
            ops.indexer_topk(a["q8"], a["w"], meta.positions, meta.token_to_req, meta.comp_block_table, self.src.idx,
                             meta.topk_buffer[:T], self.plan.workspace, meta.is_valid_token, cand, ratio=role.ratio,
                             page_tokens=cfg.comp_page_tokens(role.ratio), max_keys=self.plan.max_keys[role.ratio],
                             candidate_mode=role.candidate_mode)

    # ---- YOCO metadata ------------------------------------------------------------------------
    def _metadata_stages(self, add, meta, state):
        cfg, role, plan = self.cfg, self.role, self.plan
        T, Td, R = meta.num_tokens, meta.num_decode_tokens, meta.num_reqs
        r = role.ratio
        if state.need("swa", None):
            @add("swa_metadata", "metadata")
            def _():
                plan.positions_i32[:T].copy_(meta.positions)
                if Td:
                    ops.decode_swa_indices(meta.token_to_req[:Td], plan.positions_i32[:Td],
                                           meta.is_valid_token[:Td], meta.swa_block_table, plan.swa_ids[:Td],
                                           plan.swa_lens[:Td], window=cfg.window, page_tokens=cfg.swa_page_tokens)
                if T > Td:
                    qsl, sl = meta.query_start_loc, meta.seq_lens
                    qlen = qsl[1:] - qsl[:-1]
                    plan.gather_lens[:R].copy_(qlen + torch.clamp(sl - qlen, max=cfg.window - 1))
        if r and state.need("kv", role.kv_source):
            @add("kv_metadata", "metadata")
            def _():
                torch.floor_divide(meta.seq_lens, r, out=plan.comp_seq_lens[r][:R])
        if not state.need("index", (role.kv_source, role.index_source)):
            return
        if Td and r:
            @add("topk_translate", "metadata")
            def _():
                translate_decode_topk(meta.topk_buffer[:Td], meta.token_to_req[:Td], meta.comp_block_table,
                                      meta.is_valid_token[:Td], plan.dec_ids[:Td], plan.dec_lens[:Td],
                                      page_tokens=cfg.comp_page_tokens(r))
        if T > Td:
            @add("combine_topk_swa", "metadata")
            def _():
                for c, (r0, r1) in enumerate(meta.prefill_chunks):
                    t0, t1 = meta.query_start_loc_cpu[r0], meta.query_start_loc_cpu[r1]
                    chunk_indices(meta.topk_buffer[t0:t1] if r else None, meta.query_start_loc[r0:r1 + 1],
                                  meta.seq_lens[r0:r1], plan.gather_lens[r0:r1], plan.combined[t0:t1, :self.cols],
                                  plan.combined_lens[t0:t1], topk=cfg.index_topk if r else 0, window=cfg.window,
                                  ratio=r, slab_rows=plan.slab_rows, swa_row0=self._slab_n(meta, c))

    # ---- decode rows ---------------------------------------------------------------------------
    def _decode_stages(self, add, meta, a):
        cfg, role, plan, w = self.cfg, self.role, self.plan, self.w
        Td, r = meta.num_decode_tokens, role.ratio
        comp = {}
        if r:  # the lists topk_translate built for the index group
            comp = dict(comp_cache=self.src.comp, comp_ids=plan.dec_ids[:Td], comp_lens=plan.dec_lens[:Td],
                        comp_page_tokens=cfg.comp_page_tokens(r))

        @add("sparse_mla_decode", "op")
        def _():
            decode_attention(a["q"][:Td], self.own.swa, plan.swa_ids[:Td], plan.swa_lens[:Td], a["o"][:Td],
                             plan.workspace, w.sink, swa_page_tokens=cfg.swa_page_tokens, **comp, **plan.decode_kw)

    # ---- prefill chunks ------------------------------------------------------------------------
    def _slab_n(self, meta, chunk):
        """First SWA row N of a chunk's slabs: the most compressed entries of its requests."""
        r = self.role.ratio
        if not r:
            return 0
        r0, r1 = meta.prefill_chunks[chunk]
        return max(meta.seq_lens_cpu[r0:r1]) // r

    def _prefill_stages(self, add, meta, state, a):
        cfg, role, plan, w = self.cfg, self.role, self.plan, self.w
        r, C, qsl = role.ratio, self.cols, meta.query_start_loc_cpu
        for c, (r0, r1) in enumerate(meta.prefill_chunks):
            t0, t1 = qsl[r0], qsl[r1]
            N, slab = self._slab_n(meta, c), plan.slab_view(r1 - r0)
            qlen = [qsl[b + 1] - qsl[b] for b in range(r0, r1)]
            G = max(q + min(L - q, cfg.window - 1) for q, L in zip(qlen, meta.seq_lens_cpu[r0:r1]))
            if N + G > plan.slab_rows:
                raise ValueError(f"layer {role.layer}: prefill chunk {c} needs {N + G} slab rows, the plan has "
                                 f"{plan.slab_rows}")
            if r and state.need_gather(role.kv_source, c):
                @add("kv_gather_compressed", "metadata")
                def _(r0=r0, r1=r1, slab=slab):
                    gather_compressed_rows(self.src.comp, plan.comp_seq_lens[r][r0:r1], meta.comp_block_table[r0:r1],
                                           slab, page_tokens=cfg.comp_page_tokens(r))
            elif not r:
                state.slab_overwritten()

            @add("kv_gather_swa", "op")
            def _(r0=r0, r1=r1, slab=slab, N=N):
                gather_swa_rows(self.own.swa, meta.seq_lens[r0:r1], meta.swa_block_table[r0:r1],
                                plan.gather_lens[r0:r1], slab, page_tokens=cfg.swa_page_tokens, row0=N)

            @add("sparse_mla_prefill", "op")
            def _(t0=t0, t1=t1, slab=slab):
                # slab rows and the combined matrix come from the stages above and the index group's build
                prefill_chunk_attention(a["q"][t0:t1], slab, plan.combined[t0:t1, :C], plan.combined_lens[t0:t1],
                                        a["o"][t0:t1], w.sink)
