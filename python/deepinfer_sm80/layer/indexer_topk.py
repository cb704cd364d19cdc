"""The indexer's scoring and top-k selection: the one place where the fused library op
(`dsv4_indexer_topk`) drops in. Until the library exports it, `_torch_indexer_topk`, a
PyTorch implementation of the same contract, stands in (benchmark rows mark it).

Contract (per row t of request b = row_req[t], n_t = (positions[t] + 1) // ratio eligible
compressed entries, state j at page block_table[b, j // P], slot j % P of the indexer cache):

    logit[t, j] = sk_j * sum_h w[t, h] * relu(sum_d q8[t, h, d] * k_j[d])     (e4m3 decoded, fp32)

Selection: the first min(K, |E_t|) eligible columns by (order key descending, j ascending),
where the order key ranks every NaN above +inf and -0.0 with +0.0; written ascending, then -1
up to column K. Short rows (|E_t| <= K) are E_t ascending; invalid rows and n_t <= 0 all -1.
Candidate mode 1 (the candidate source) also writes, per row, the best C blocks of B columns
by block maximum (the block holding column n_t - 1 pinned, -inf blocks excluded), ascending,
-1 padded; mode 2 restricts E_t to the listed blocks (ids outside [0, ceil(n_t / B)) ignored).
"""
import torch

from .. import ops

STANDIN = "torch"          # the name benchmark rows give the stand-in
_LIBRARY_OP = getattr(ops, "indexer_topk", None)


def implementation():
    """'library' when the fused op is available, else the stand-in's name."""
    return "library" if _LIBRARY_OP is not None else STANDIN


def indexer_topk(q8, w, positions, row_req, row_valid, block_table, cache, topk_out, *, page_tokens, ratio, topk,
                 max_keys, candidate_mode=0, cand=None, candidate_count=2048, candidate_block=8):
    """Score and select the top-k compressed entries of every row (contract above).

    q8: uint8 e4m3 [T, H_I, 128]; w: fp32 [T, H_I]; positions: int64 [T]; row_req: int32 [T];
    row_valid: bool/uint8 [T]; block_table: int32 [R, width]; cache: uint8 indexer pages
    [num_pages, >= P * 132]; topk_out: int32 [T, >= topk], columns [0, topk) written;
    max_keys: a bound on n_t over the rows (host int: sizes the scoring); cand: int32
    [T, >= candidate_count] (written in mode 1, read in mode 2)."""
    kw = dict(page_tokens=page_tokens, ratio=ratio, topk=topk, max_keys=max_keys, candidate_mode=candidate_mode,
              candidate_count=candidate_count, candidate_block=candidate_block)
    if _LIBRARY_OP is not None:
        return _LIBRARY_OP(q8, w, positions, row_req, row_valid, block_table, cache, topk_out, cand, **kw)
    return _torch_indexer_topk(q8, w, positions, row_req, row_valid, block_table, cache, topk_out, cand, **kw)


# ---- the PyTorch stand-in --------------------------------------------------------------------
_BUDGET = {"cpu": 256 << 20, "cuda": 1 << 30}   # bytes of fp32 temporaries per row chunk


def order_key(x):
    """int64 order keys of fp32 values (larger = preferred): NaN above +inf, -0.0 as +0.0."""
    u = torch.where(x == 0, torch.zeros_like(x), x).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    key = torch.where(u >= 0x80000000, 0xFFFFFFFF - u, u | 0x80000000)
    return torch.where(torch.isnan(x), torch.full_like(key, 0xFFFFFFFF), key)


def _select(key, k):
    """Per row: the first k columns by (key desc, column asc) among key >= 0, ascending, -1 padded."""
    k_eff = min(k, key.shape[1])
    order = torch.sort(key, dim=1, descending=True, stable=True).indices[:, :k_eff]
    chosen = torch.gather(key, 1, order) >= 0
    big = torch.iinfo(torch.int64).max
    idx = torch.sort(torch.where(chosen, order, big), dim=1).values
    idx = torch.where(idx == big, -1, idx)
    if k_eff < k:
        idx = torch.cat([idx, idx.new_full((idx.shape[0], k - k_eff), -1)], 1)
    return idx.to(torch.int32)


def _keys(cache, page_tokens, block_table, req, n_cols):
    """Decoded e4m3 key codes fp32 [rows, n_cols, 128] and scales fp32 [rows, n_cols]."""
    P = page_tokens
    j = torch.arange(n_cols, device=cache.device)
    width = block_table.shape[1]
    pages = block_table[req.long()][:, torch.clamp(j // P, max=width - 1)].long()
    codes = cache[:, :P * 128].reshape(cache.shape[0], P, 128)
    scales = cache[:, P * 128:P * 132].view(torch.float32)
    slot = (j % P).expand_as(pages)
    k = codes[pages, slot].view(torch.float8_e4m3fn).float()
    return k, scales[pages, slot]


def _torch_indexer_topk(q8, w, positions, row_req, row_valid, block_table, cache, topk_out, cand, *, page_tokens,
                        ratio, topk, max_keys, candidate_mode, candidate_count, candidate_block):
    T, HI = w.shape
    if T == 0:
        return
    n_cols = max(1, int(max_keys))
    B = candidate_block
    n_blk = -(-n_cols // B)
    n_cols_pad = n_blk * B
    per_row = n_cols_pad * (128 + HI + 8) * 4
    rows = max(1, _BUDGET.get(q8.device.type, _BUDGET["cuda"]) // per_row)
    cache2 = cache.reshape(cache.shape[0], -1)
    for t0 in range(0, T, rows):
        t1 = min(T, t0 + rows)
        n = (positions[t0:t1] + 1) // ratio
        n = torch.where(row_valid[t0:t1].bool(), n, torch.zeros_like(n))
        k, sk = _keys(cache2, page_tokens, block_table, row_req[t0:t1], n_cols_pad)
        q = q8[t0:t1].view(torch.float8_e4m3fn).float()
        dots = torch.relu(torch.einsum("rhd,rnd->rhn", q, k))
        logit = (dots * w[t0:t1, :, None]).sum(1) * sk
        eligible = torch.arange(n_cols_pad, device=q8.device)[None, :] < n[:, None]
        if candidate_mode == 2:
            eligible &= candidate_columns(cand[t0:t1, :candidate_count], n, n_cols_pad, B)
        topk_out[t0:t1, :topk] = select(logit, eligible, topk)
        if candidate_mode == 1:
            cand[t0:t1, :candidate_count] = candidate_blocks(logit, n, candidate_count, B)


def select(logit, eligible, k):
    """int32 [rows, k]: per row the first min(k, |eligible|) columns of logit fp32 [rows, n] by
    (order key desc, column asc), ascending, -1 padded."""
    return _select(torch.where(eligible, order_key(logit), -1), k)


def candidate_blocks(logit, n, count, B):
    """The candidate source's lists int32 [rows, count]: blocks of B columns of logit fp32
    [rows, n_pad] (n_pad a multiple of B) ranked by their maximum over columns < n (per row),
    the block holding column n - 1 pinned, -inf blocks left out; ascending, -1 padded."""
    rows, n_pad = logit.shape
    col = torch.arange(n_pad, device=logit.device)
    masked = torch.where(col[None, :] < n[:, None], logit, float("-inf"))
    score = masked.view(rows, n_pad // B, B).amax(2)
    blk = torch.arange(n_pad // B, device=logit.device)
    nb = (n + B - 1) // B
    score = torch.where(blk[None, :] == nb[:, None] - 1, float("inf"), score)
    return select(score, score != float("-inf"), count)


def candidate_columns(cand, n, n_pad, B):
    """bool [rows, n_pad]: the columns of the blocks listed in cand int32 [rows, C] (ids outside
    [0, ceil(n / B)) ignored), restricted to columns < n."""
    rows, n_blk = cand.shape[0], n_pad // B
    ids = cand.long()
    nb = (n + B - 1) // B
    ok = (ids >= 0) & (ids < nb[:, None])
    listed = torch.zeros(rows, n_blk + 1, dtype=torch.bool, device=cand.device)
    listed.scatter_(1, torch.where(ok, ids, n_blk), True)
    col = torch.arange(n_pad, device=cand.device)
    return listed[:, :n_blk].repeat_interleave(B, 1) & (col[None, :] < n[:, None])
