"""A step through a chain of V4.1 attention blocks and its fp32 reference, shared by the layer
tests: synthetic metadata, random caches and weights, the library blocks and the PyTorch model
side by side, and the checks that compare them (bounds from the op contracts)."""
import torch

from deepinfer_sm80.layer import AttentionBlock, BlockIO, LayerPlan, StepState, random_caches, random_weights
from deepinfer_sm80.layer import synthetic_step
from deepinfer_sm80.layer.reference import ReferenceState, _dequant_indexer, reference_block, reference_seam

# decode requests first: (context, query) with 1 + spec tokens; prefill: a fresh prompt, one
# continuing at an odd position (the ratio-2 compressor reads its ring), one long context.
MIXED = [(300, 1), (157, 6), (0, 40), (201, 37)]


def bf16_ulp(x):
    """One bf16 ulp at |x| (fp32 tensor)."""
    e = torch.frexp(x.abs().clamp(min=2.0 ** -126))[1]
    return torch.exp2((e - 8).float())


def rel_l2(got, want):
    return ((got.float() - want).norm() / want.norm().clamp(min=1e-30)).item()


class Chain:
    """Library blocks and the reference for `layers` (model order) on one step."""

    def __init__(self, cfg, layers, requests, num_decodes, *, device, seed, reuse=True, max_position=None):
        self.cfg, self.device, self.layers = cfg, torch.device(device), layers
        gen = torch.Generator().manual_seed(seed)
        self.meta, sizes = synthetic_step(cfg, requests, num_decodes=num_decodes, device=device, gen=gen)
        T = self.meta.num_tokens
        need = sorted({cfg.role(x).kv_source for x in layers if cfg.role(x).ratio} | set(layers))
        self.caches = {x: random_caches(cfg, cfg.role(x), sizes, device=device, gen=gen) for x in need}
        max_pos = max_position or max(c + q for c, q in requests) + 1
        self.weights = {x: random_weights(cfg, cfg.role(x), max_position=max_pos, device=device, gen=gen)
                        for x in layers}
        self.io = {x: BlockIO.random(T, cfg.hidden, device=device, gen=gen) for x in layers}
        slab_rows = max(c + q for c, q in requests) + cfg.window + T
        self.plan = LayerPlan(cfg, device=device, max_tokens=T, max_decode_tokens=max(self.meta.num_decode_tokens, 1),
                              max_reqs=len(requests), max_model_len=max_pos, slab_rows=slab_rows, sm_count=0 if device != "cpu" else 108)
        self.state = StepState(self.meta, reuse=reuse)
        self.blocks = {x: AttentionBlock(cfg, x, self.weights[x], self.caches, self.plan) for x in layers}

    def reference_state(self):
        return ReferenceState.from_caches(self.cfg, self.caches)

    def run(self, layer):
        self.blocks[layer].forward(self.io[layer], self.meta, self.state)


def check_layer(chain, layer, want):
    """The library block's results of `layer` against the reference's `want`."""
    cfg, io, meta = chain.cfg, chain.io[layer], chain.meta
    T = meta.num_tokens
    a = chain.plan.acts(T)
    if "topk" in want:
        check_indexer(chain, layer, want)
    # Attention (sparse MLA contract): max abs <= 1e-2 max|K| (max|o| <= max|K|: the tighter
    # max|o| is used), relative L2 <= 5e-3.
    o = a["o"].float().cpu()
    assert rel_l2(o, want["o"]) <= 5e-3, f"layer {layer}: attention output rel L2 {rel_l2(o, want['o']):.2e}"
    err, bound = (o - want["o"]).abs().max().item(), 1e-2 * want["o"].abs().max().item()
    assert err <= bound, f"layer {layer}: attention output max abs {err:.3e} > {bound:.3e}"
    # x: two more bf16 GEMM outputs, each rounding by at most 2^-9 relative.
    x = a["x_attn"].float().cpu()
    err = rel_l2(x, want["x_attn"])
    assert err <= 5e-3 + 2 * 2 ** -9, f"layer {layer}: x rel L2 {err:.2e}"
    # Residual (mHC post, an fp32 fmaf chain of 5 terms): |d R| <= post * |d x| + the chain's fp32
    # roundings (5 half ulps of the terms' magnitude) + one bf16 ulp of the larger side.
    Rg, post, comb = io.residual_out.float().cpu(), io.post.cpu(), io.comb.cpu()
    mass = post[:, :, None] * x.abs()[:, None, :] + torch.einsum("tjk,tjh->tkh", comb.abs(),
                                                                  io.residual.float().cpu().abs())
    bound = post[:, :, None] * (x - want["x_attn"]).abs()[:, None, :] + 2.0 ** -21 * mass + bf16_ulp(
        torch.maximum(Rg.abs(), want["residual_out"].abs()))
    assert ((Rg - want["residual_out"]).abs() <= bound).all(), f"layer {layer}: residual_out beyond post*|dx| + 1 ulp"
    # The seam given the block's own x: gates within the mHC contract, the FFN input within 1 ulp.
    # Gates of the stored residual: the projection within 1e-5 of its absolute mass A (mHC
    # contract), carried by the gate slopes (pre: sigmoid' <= 1/4 times scale[0]; post:
    # 2 * 1/4 * scale[1]; comb: softmax' <= 1/2 times scale[2], twice for the Sinkhorn steps),
    # plus the epilogue's 1e-5.
    w = chain.weights[layer]
    seam = reference_seam(cfg, w, io, x, r_new=Rg)
    bound = 2.0 ** -21 * mass + bf16_ulp(torch.maximum(Rg.abs(), seam["residual_out"].abs()))
    assert ((Rg - seam["residual_out"]).abs() <= bound).all(), f"layer {layer}: mHC post given the block's x"
    X = Rg.reshape(T, -1).double()
    rms = torch.rsqrt((X * X).mean(1) + cfg.rms_norm_eps)
    delta = 1e-5 * (rms[:, None] * (X.abs() @ w.fn.cpu().double().abs().t())).amax(1)
    sc = w.scale.cpu().double()
    for k, slope in (("pre_out", sc[0] / 4), ("post_out", sc[1] / 2), ("comb_out", sc[2])):
        err = (getattr(io, k).cpu().double() - seam[k].double()).abs().reshape(T, -1).amax(1)
        ok = err <= slope * delta + 1e-5
        assert ok.all(), f"layer {layer}: {k} off by {err.max():.2e} from the fp64 gates " \
            f"(bound {slope * delta.max():.2e})"
    # FFN input: the collapse may round the other way (1 ulp of it, scaled by the norm's factor),
    # then the norm's own rounding (1 ulp).
    li, want_li, y = io.layer_input.float().cpu(), seam["layer_input"], seam["collapse"]
    factor = (want_li / torch.where(y == 0, torch.ones_like(y), y)).abs()
    bound = factor * bf16_ulp(y) + bf16_ulp(torch.maximum(li.abs(), want_li.abs()))
    over = (li - want_li).abs() - bound
    i = int(over.argmax())
    assert (over <= 0).all(), f"layer {layer}: FFN input beyond its rounding bound at {i}: got " \
        f"{li.flatten()[i]:.6g}, want {want_li.flatten()[i]:.6g} (collapse {y.flatten()[i]:.6g}, bound " \
        f"{bound.flatten()[i]:.3g})"


def _scores(chain, layer):
    """fp64 logits [T][n_t] and their absolute mass A from the block's own index codes and the
    library's indexer cache (the scoring contract's inputs)."""
    cfg, meta, role = chain.cfg, chain.meta, chain.cfg.role(layer)
    a = chain.plan.acts(meta.num_tokens)
    q = a["q8"].cpu().view(torch.float8_e4m3fn).double()
    w = a["w"].cpu().double()
    P = cfg.comp_page_tokens(role.ratio)
    keys = _dequant_indexer(chain.caches[role.kv_source].idx.cpu(), P).double()
    bt, t2r, pos = meta.comp_block_table.cpu().long(), meta.token_to_req.cpu().long(), meta.positions.cpu()
    out = []
    for t in range(meta.num_tokens):
        j = torch.arange(int(pos[t] + 1) // role.ratio)
        k = keys[bt[t2r[t], j // P] * P + j % P]
        out.append(((torch.relu(q[t] @ k.t()) * w[t][:, None]).sum(0),
                    ((q[t].abs() @ k.abs().t()) * w[t].abs()[:, None]).sum(0)))
    return out


def _check_selection(got, scores, eligible, what):
    """got (ids, ascending, -1 padded) is the selection of the rule (value desc, id asc) among
    `eligible` up to the scoring tolerance 1e-5 * A per column (indexer contract)."""
    lg, A = scores
    ids = [j for j in got if j >= 0]
    assert ids == sorted(ids) and all(j < 0 for j in got[len(ids):]), f"{what}: layout {got}"
    el = torch.nonzero(eligible).flatten().tolist()
    want = sorted(sorted(el, key=lambda j: (-lg[j].item(), j))[:len(got)])
    assert len(ids) == len(want), f"{what}: {len(ids)} entries, the rule gives {len(want)}"
    if ids == want:
        return
    theta = min(lg[j].item() for j in want)
    for j in set(ids) ^ set(want):
        assert abs(lg[j].item() - theta) <= 1e-5 * A[j].item() + 1e-5 * A.max().item(), \
            f"{what}: column {j} (logit {lg[j].item():.6g}) is not a tie with the boundary {theta:.6g}"


def check_indexer(chain, layer, want):
    """The block's top-k rows (and candidate lists) against the selection rule on fp64 scores
    of its own codes; and against the reference's own selection on most rows."""
    cfg, meta, role = chain.cfg, chain.meta, chain.cfg.role(layer)
    T, B, C = meta.num_tokens, cfg.candidate_block_size, cfg.candidate_blocks
    got, cand = meta.topk_buffer[:T].cpu(), meta.candidate_buffer[:T].cpu()
    for t, (lg, A) in enumerate(_scores(chain, layer)):
        n = lg.shape[0]
        eligible = torch.ones(n, dtype=torch.bool)
        if role.candidate_mode == 2:
            blocks = {g for g in cand[t].tolist() if 0 <= g < -(-n // B)}
            eligible = torch.tensor([j // B in blocks for j in range(n)], dtype=torch.bool)
        _check_selection(got[t].tolist(), (lg, A), eligible, f"layer {layer} top-k row {t}")
        if role.candidate_mode == 1:
            nb = -(-n // B)
            bs = torch.stack([lg[g * B:(g + 1) * B].max() for g in range(nb)]) if nb else lg[:0]
            ba = torch.stack([A[g * B:(g + 1) * B].max() for g in range(nb)]) if nb else A[:0]
            if nb:
                bs[nb - 1] = float("inf")
            _check_selection(cand[t, :C].tolist(), (bs, ba), bs != float("-inf"), f"layer {layer} candidates row {t}")
    same = (got == want["topk"]).all(1).float().mean().item()
    assert same >= 0.9, f"layer {layer}: only {same:.0%} of the top-k rows equal the reference's own selection"


def run_and_check(chain):
    """Run every layer of the chain and its reference in order; check each."""
    ref = chain.reference_state()
    for layer in chain.layers:
        chain.run(layer)
        role, T = chain.cfg.role(layer), chain.meta.num_tokens
        selected = None
        if role.owns_indexer:  # attend with the block's selection, checked in check_indexer
            selected = (chain.meta.topk_buffer[:T].cpu(),
                        chain.meta.candidate_buffer[:T].cpu() if role.candidate_mode == 1 else None)
        want = reference_block(chain.cfg, layer, chain.weights[layer], chain.meta, chain.io[layer], ref, selected)
        check_layer(chain, layer, want)
    return ref
