"""LayerPlan: every buffer the attention blocks of one serving configuration use, allocated
once: the op workspace (ops.Planner), the per-step metadata buffers, the prefill slab and the
activations. Nothing is allocated by a block's library calls, so a decode step can be captured
in a CUDA graph after one warm-up run."""
import torch

from .. import ops
from .._ops import addr
from ..indices import combine_cols
from .config import HEAD_DIM, INDEX_HEAD_DIM


class LayerPlan:
    """Buffers for steps of at most max_tokens tokens (max_decode_tokens of them decode rows),
    max_reqs requests, positions below max_model_len, prefill chunks of at most slab_reqs requests
    whose slab holds slab_rows bf16 rows per request (>= compressed entries + gathered SWA rows
    of a request).

    num_splits / sm_count: the split-KV choice of sparse_mla_decode (0 = the library's; on a
    machine without a GPU pass sm_count). decode_tokens: the decode row counts a graph is
    captured for (default 1..max_decode_tokens)."""

    def __init__(self, cfg, *, device, max_tokens, max_decode_tokens, max_reqs, max_model_len, slab_rows,
                 slab_reqs=4, num_splits=0, sm_count=0, decode_tokens=None):
        self.cfg, self.device = cfg, torch.device(device)
        self.max_tokens, self.slab_rows = max_tokens, slab_rows
        self.decode_kw = dict(num_splits=num_splits, sm_count=sm_count)
        self.planner = ops.Planner()
        dec = list(decode_tokens or range(1, max_decode_tokens + 1))
        for r in sorted(set(cfg.compress_ratios)):
            extra = dict(extra_width=cfg.index_topk, extra_page_tokens=cfg.comp_page_tokens(r)) if r else {}
            if dec:
                self.planner.sparse_mla_decode(dec, cfg.num_heads, main_width=cfg.window,
                                               main_page_tokens=cfg.swa_page_tokens, **extra, **self.decode_kw)
        seam_tokens = sorted(set(list(range(1, min(max_tokens, 64) + 1)) + list(range(64, max_tokens + 1, 64))
                                 + [max_tokens] + dec))
        self.planner.mhc_seam(seam_tokens, cfg.hidden)
        # The indexer's column bound per ratio: fixed, so that a captured graph's descriptor is.
        self.max_keys = {r: max_model_len // r for r in set(cfg.compress_ratios) - {0}}
        scored = {(cfg.role(x).ratio, cfg.role(x).candidate_mode) for x in cfg.index_sources}
        for r, mode in sorted(scored):
            self.planner.indexer_topk(range(1, max_tokens + 1), cfg.index_heads, cfg.index_topk, ratio=r,
                                      max_keys=self.max_keys[r], page_tokens=cfg.comp_page_tokens(r),
                                      candidate_mode=mode, candidate_count=cfg.candidate_blocks)
        self.workspace = self.planner.workspace(self.device)
        i32 = dict(dtype=torch.int32, device=self.device)
        W, K = cfg.window, cfg.index_topk
        self.cols = combine_cols(K, W)
        self.positions_i32 = torch.empty(max_tokens, **i32)
        self.swa_ids = torch.empty(max(max_decode_tokens, 1), W, **i32)
        self.swa_lens = torch.empty(max(max_decode_tokens, 1), **i32)
        self.dec_ids = torch.empty(max(max_decode_tokens, 1), K, **i32)
        self.dec_lens = torch.empty(max(max_decode_tokens, 1), **i32)
        self.combined = torch.empty(max_tokens, self.cols, **i32)
        self.combined_lens = torch.empty(max_tokens, **i32)
        self.gather_lens = torch.empty(max_reqs, **i32)
        self.comp_seq_lens = {r: torch.empty(max_reqs, **i32) for r in set(cfg.compress_ratios) - {0}}
        self.slab = torch.empty(slab_reqs, slab_rows, HEAD_DIM, dtype=torch.bfloat16, device=self.device)
        self._acts = self._activations(cfg, max_tokens)
        addr(torch.empty(0, device=self.device))  # the binding's dummy address for empty tensors, made now

    def _activations(self, cfg, n):
        bf, f32, u8 = torch.bfloat16, torch.float32, torch.uint8
        H, HI, G, ol = cfg.num_heads, cfg.index_heads, cfg.o_groups, cfg.o_lora_rank
        shapes = dict(qkv=((cfg.q_lora_rank + HEAD_DIM,), bf), qr=((cfg.q_lora_rank,), bf), kv=((HEAD_DIM,), bf),
                      q=((H, HEAD_DIM), bf), o=((H, HEAD_DIM), bf), kv_score=((2 * HEAD_DIM,), f32),
                      latent=((HEAD_DIM,), bf), k_pre=((INDEX_HEAD_DIM,), bf), q_idx=((HI, INDEX_HEAD_DIM), bf),
                      w_raw=((HI,), bf), q8=((HI, INDEX_HEAD_DIM), u8), w=((HI,), f32), oa_flat=((G * ol,), bf),
                      x_attn=((cfg.hidden,), bf))
        return {k: torch.empty(n, *s, dtype=dt, device=self.device) for k, (s, dt) in shapes.items()}

    def acts(self, T):
        """Views of the activation buffers for T tokens (a dict; contiguous [T, ...] tensors,
        `kv_score` as a flat fp32 buffer)."""
        if T > self.max_tokens:
            raise ValueError(f"LayerPlan: a step of {T} tokens exceeds max_tokens {self.max_tokens}")
        a = {k: v[:T] for k, v in self._acts.items()}
        a["kv_score"] = self._acts["kv_score"].view(-1)
        return a

    def slab_view(self, nreq):
        """The prefill workspace of a chunk of nreq requests: bf16 [nreq, slab_rows, 512]."""
        return self.slab[:nreq]
