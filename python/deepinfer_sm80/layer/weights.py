"""The weights of one V4.1 attention block (bf16 projections, fp32 sink and mHC gate
parameters) and the rotary tables, with a random initialisation at the model's shapes."""
from dataclasses import dataclass

import torch

from .config import HEAD_DIM, INDEX_HEAD_DIM


@dataclass
class LayerWeights:
    """wqa_wkv bf16 [q_lora + 512, hidden]; q_norm bf16 [q_lora]; kv_norm bf16 [512]; wq_b bf16
    [H * 512, q_lora]; sink fp32 [H]; wo_a bf16 [G, hpg * 512, o_lora]; wo_b bf16 [hidden,
    G * o_lora]; the FFN site's mHC gates: fn fp32 [24, 4 * hidden], scale fp32 [3], base fp32
    [24], ffn_norm bf16 [hidden]; cos_sin fp32 [max_position, 64] (the layer's rotary table).
    kv sources: wc bf16 [512 * ratio, hidden], c_norm bf16 [512], wk bf16 [128, 512], k_norm
    bf16 [128]. Index sources: wq_idx bf16 [H_I * 128, q_lora], w_proj bf16 [H_I, hidden]."""
    wqa_wkv: torch.Tensor
    q_norm: torch.Tensor
    kv_norm: torch.Tensor
    wq_b: torch.Tensor
    sink: torch.Tensor
    wo_a: torch.Tensor
    wo_b: torch.Tensor
    fn: torch.Tensor
    scale: torch.Tensor
    base: torch.Tensor
    ffn_norm: torch.Tensor
    cos_sin: torch.Tensor
    wc: torch.Tensor = None
    c_norm: torch.Tensor = None
    wk: torch.Tensor = None
    k_norm: torch.Tensor = None
    wq_idx: torch.Tensor = None
    w_proj: torch.Tensor = None


def rope_table(max_position, theta, device="cpu"):
    """fp32 [max_position, 64]: cos of the 32 GPT-J pair angles, then their sines (plain
    theta; checkpoints with YaRN scaling pass their own table)."""
    inv = theta ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    ang = torch.arange(max_position, dtype=torch.float64, device=device)[:, None] * inv.to(device)[None, :]
    return torch.cat([ang.cos(), ang.sin()], 1).float()


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, device=gen.device)


def _lin(gen, out_f, in_f):
    return (_randn(gen, out_f, in_f) * in_f ** -0.5).to(torch.bfloat16)


def _norm_w(gen, n):
    return (1 + 0.25 * torch.rand(n, generator=gen, device=gen.device)).to(torch.bfloat16)


def random_weights(cfg, role, *, max_position, device="cpu", gen=None):
    """LayerWeights of `role` at cfg's shapes (made on gen's device, moved to `device`):
    projections ~ N(0, 1/fan_in) (unit-scale activations), norm weights in [1, 1.25], sink ~
    N(0, 1), mHC fn ~ N(0, 1/(4 hidden)), scale in [0.5, 1.5], base ~ N(0, 0.25); the rotary
    table of the layer's ratio."""
    gen = gen or torch.Generator().manual_seed(2)
    H, hd, ql, G = cfg.num_heads, cfg.hidden, cfg.q_lora_rank, cfg.o_groups
    w = LayerWeights(
        wqa_wkv=_lin(gen, ql + HEAD_DIM, hd), q_norm=_norm_w(gen, ql), kv_norm=_norm_w(gen, HEAD_DIM),
        wq_b=_lin(gen, H * HEAD_DIM, ql), sink=_randn(gen, H),
        wo_a=(_randn(gen, G, cfg.heads_per_group * HEAD_DIM, cfg.o_lora_rank)
              * (cfg.heads_per_group * HEAD_DIM) ** -0.5).to(torch.bfloat16),
        wo_b=_lin(gen, hd, G * cfg.o_lora_rank),
        fn=_randn(gen, 24, 4 * hd) * (4 * hd) ** -0.5, scale=0.5 + torch.rand(3, generator=gen, device=gen.device),
        base=0.5 * _randn(gen, 24), ffn_norm=_norm_w(gen, hd),
        cos_sin=rope_table(max_position, cfg.compress_rope_theta if role.ratio else cfg.rope_theta, gen.device))
    if role.owns_kv:
        w.wc, w.c_norm = _lin(gen, HEAD_DIM * role.ratio, hd), _norm_w(gen, HEAD_DIM)
        w.wk, w.k_norm = _lin(gen, INDEX_HEAD_DIM, HEAD_DIM), _norm_w(gen, INDEX_HEAD_DIM)
    if role.owns_indexer:
        w.wq_idx, w.w_proj = _lin(gen, cfg.index_heads * INDEX_HEAD_DIM, ql), _lin(gen, cfg.index_heads, hd)
    for name, t in vars(w).items():
        if t is not None:
            setattr(w, name, t.to(device))
    return w
