"""indexer family on the host path: what the binding adds to the C reference (descriptors from
tensor shapes and strides, page geometry from the cache tensor, outputs written in place, numpy
and torch alike), bit for bit against dsv4_<op>_ref called directly on dense arrays. The formulas
are checked by tests/indexer against fp64 models and known answers."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm

STATE = 132


def _page_stride(P):
    return (P * STATE + 575) // 576 * 576


@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_indexer_q(be, rng, layout):
    T, H, max_pos = 5, 32, 30
    q = sm.rng_bf16(rng, (T, H, 128), -12, 8)
    q[1, 3] = 0  # an all-zero head: the smallest scale
    w_raw = sm.rng_bf16(rng, (T, H), -3, 2)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    cs = rng.standard_normal((max_pos, 64)).astype(np.float32)
    q8, w = oracle.poison(rng, (T, H, 128), np.uint8), oracle.poison(rng, (T, H), np.float32)
    want_q8, want_w = q8.copy(), w.copy()
    oracle.ref("indexer_q", dict(num_tokens=T, num_heads=H, q_stride_token=H * 128, q_stride_head=128,
                                 w_stride_token=H, max_position=max_pos),
               q=q, w_raw=w_raw, positions=pos, cos_sin=cs, q8=want_q8, w=want_w)
    qt = oracle.embed(be, q, 8, 0x7FC0)[0] if layout == "padded" else be.put(q)
    wt = oracle.embed(be, w_raw, 3, 0x7FC0)[0] if layout == "padded" else be.put(w_raw)
    q8t, w_t = be.put(q8), be.put(w)
    got = d.indexer_q(qt, wt, be.put(pos), be.put(cs), q8t, w_t)
    assert got[0] is q8t and got[1] is w_t
    oracle.assert_bits(be.get(q8t), want_q8, f"indexer_q codes ({layout})")
    oracle.assert_bits(be.get(w_t), want_w, f"indexer_q weights ({layout})")


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("P", [64, 128])
def test_indexer_k_store(be, rng, ratio, P):
    T, pages, max_pos = 40, 3, 64
    stride = _page_stride(P)
    cache = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)
    k = sm.rng_bf16(rng, (T, 128), -6, 5)
    gamma = sm.rng_bf16(rng, (128,), -1, 1)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    slots[3], slots[7] = -1, pages * P + 5
    want = cache.copy()
    oracle.ref("indexer_k_store", dict(num_tokens=T, k_stride_row=128, ratio=ratio, max_position=max_pos,
                                       page_tokens=P, page_stride_bytes=stride, num_pages=pages, eps=1e-6),
               k_pre=k, gamma=gamma, positions=pos, slot_mapping=slots, cos_sin=(cs := rng.standard_normal(
                   (max_pos, 64)).astype(np.float32)), cache=want)
    assert not np.array_equal(want, cache), "the reference wrote nothing"
    view, whole = oracle.embed(be, cache, 48, 0xA5)  # pages inside wider rows
    kt = oracle.embed(be, k, 8, 0x7FC0)[0]
    assert d.indexer_k_store(kt, be.put(gamma), be.put(pos), be.put(slots), be.put(cs), view, page_tokens=P,
                             ratio=ratio, eps=1e-6) is view
    w = be.get(whole)
    assert (w[:, stride:] == 0xA5).all(), "bytes between pages were written"
    oracle.assert_bits(w[:, :stride], want, f"indexer_k_store cache (r={ratio}, P={P})")


def test_indexer_k_store_small_page_is_refused(be, rng):
    cache = be.put(np.zeros((2, 64 * STATE - 16), np.uint8))
    z = be.put(np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="132"):
        d.indexer_k_store(be.put(np.zeros((4, 128), np.uint16)), be.put(np.zeros(128, np.uint16)), z, z,
                          be.put(np.zeros((8, 64), np.float32)), cache, page_tokens=64, ratio=1, eps=1e-6)


# ---- logits + top-k ---------------------------------------------------------------------------
def order_key(x):
    """The library's selection key of fp32 logits: NaN first, -0 as +0, then numeric order."""
    u = np.where(x == 0, np.float32(0), x).astype(np.float32).view(np.uint32).astype(np.uint64)
    key = np.where(u >> 31, ~u & 0xFFFFFFFF, u | 0x80000000)
    return np.where(np.isnan(x), 0xFFFFFFFF, key)


def select_model(logits, n, K):
    """Top K of logits[:n] by (key descending, column ascending), written ascending, -1 padded."""
    row = np.full(K, -1, np.int32)
    if n <= 0:
        return row
    key = order_key(logits[:n])
    order = np.lexsort((np.arange(n), -key.astype(np.int64)))[:K]
    row[:len(order)] = np.sort(order)
    return row


def score_case(rng, T=9, H=32, P=64, pages=6, reqs=3, max_pos=600, ratio=1):
    """A paged indexer cache with random states, rows of several requests (decode-like runs of
    consecutive positions), one padding row."""
    stride = _page_stride(P)
    cache = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)
    cache[:, :P * 128][(cache[:, :P * 128] & 0x7F) == 0x7F] = 0x11  # no NaN codes
    scales = np.exp2(rng.integers(-6, 4, size=(pages, P))).astype(np.float32)
    cache[:, P * 128:P * 132] = scales.view(np.uint8).reshape(pages, -1)
    q8 = rng.integers(0, 256, size=(T, H, 128), dtype=np.uint8)
    q8[(q8 & 0x7F) == 0x7F] = 0x22
    w = rng.standard_normal((T, H)).astype(np.float32)
    row_req = rng.integers(0, reqs, size=T).astype(np.int32)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    pos[0] = 3  # a short row: fewer columns than K
    width = -(-(max_pos // ratio + 1) // P)
    table = np.stack([rng.permutation(pages)[:width] for _ in range(reqs)]).astype(np.int32)
    valid = np.ones(T, np.uint8)
    valid[T - 1] = 0
    return cache, q8, w, pos, row_req, table, valid


@pytest.mark.parametrize("ratio", [1, 2])
def test_indexer_topk_and_logits(be, rng, ratio):
    P, K, max_pos = 64, 48, 600
    cache, q8, w, pos, row_req, table, valid = score_case(rng, P=P, ratio=ratio, max_pos=max_pos)
    T, max_keys = len(pos), max_pos // ratio + 1
    N = -(-max_keys // 4) * 4  # logits rows: a multiple of 4 floats
    fields = dict(num_rows=T, num_heads=32, ratio=ratio, num_reqs=table.shape[0], block_table_width=table.shape[1],
                  block_table_stride=table.shape[1], page_tokens=P, page_stride_bytes=cache.shape[1],
                  num_pages=cache.shape[0], max_keys=max_keys)
    arrays = dict(q8=q8, w=w, positions=pos, row_req=row_req, row_valid=valid, block_table=table, cache=cache)
    want_logits = oracle.poison(rng, (T, N), np.float32)
    oracle.ref("indexer_logits", dict(fields, out_cols=N, out_stride=N), out=want_logits, **arrays)
    want = oracle.poison(rng, (T, K), np.int32)
    oracle.ref("indexer_topk", dict(fields, topk=K, topk_stride=K), topk=want, cand=None, **arrays)
    for t in range(T):  # the reference's selection against the model on the reference's logits
        n = (pos[t] + 1) // ratio if valid[t] else 0
        assert np.array_equal(want[t], select_model(want_logits[t], n, K)), f"row {t}"
    assert (want[T - 1] == -1).all() and (want[0, :(3 + 1) // ratio] == np.arange((3 + 1) // ratio)).all()

    put = {k: be.put(v) for k, v in arrays.items()}
    tab = oracle.embed(be, table, 5, -7)[0]  # block-table rows wider than the width
    out = oracle.embed(be, np.zeros((T, K), np.int32), 3, 0x5A5A5A5A)  # topk rows 3 wider: untouched
    got = d.indexer_topk(put["q8"], put["w"], put["positions"], put["row_req"], tab, put["cache"], out[0],
                         ratio=ratio, page_tokens=P, max_keys=max_keys, row_valid=put["row_valid"])
    assert got is out[0]
    oracle.assert_bits(be.get(got), want, f"indexer_topk (r={ratio})")
    assert (be.get(out[1])[:, K:] == 0x5A5A5A5A).all(), "topk padding columns were written"
    lg = be.put(np.zeros((T, N), np.float32))
    d.indexer_logits(put["q8"], put["w"], put["positions"], put["row_req"], tab, put["cache"], lg, ratio=ratio,
                     page_tokens=P, max_keys=max_keys, row_valid=put["row_valid"])
    oracle.assert_bits(be.get(lg), want_logits, f"indexer_logits (r={ratio})")


def test_indexer_topk_candidates(be, rng):
    """Mode 1 writes the candidate blocks; mode 2 with those blocks selects from them only."""
    P, K, C, max_pos = 64, 16, 8, 380
    cache, q8, w, pos, row_req, table, valid = score_case(rng, P=P, max_pos=max_pos)
    T, max_keys = len(pos), max_pos + 1
    N = -(-max_keys // 4) * 4
    args = [be.put(a) for a in (q8, w, pos, row_req, table, cache)]
    kw = dict(ratio=1, page_tokens=P, max_keys=max_keys, row_valid=be.put(valid))
    cand = be.put(np.full((T, C), 0x7777, np.int32))
    src = d.indexer_topk(*args, be.put(np.zeros((T, K), np.int32)), cand=cand, candidate_mode=1, **kw)
    c = be.get(cand)
    logits = d.indexer_logits(*args, be.put(np.zeros((T, N), np.float32)), **kw)
    logits = be.get(logits)
    for t in range(T):
        n = (pos[t] + 1) if valid[t] else 0
        nb = -(-n // 8)
        if n <= 0:
            assert (c[t] == -1).all()
            continue
        blocks = np.full(nb, 0, np.uint64)
        for g in range(nb):
            blocks[g] = order_key(logits[t, 8 * g:min(8 * g + 8, n)]).max()
        blocks[nb - 1] = 0xFFFFFFFF
        want = np.sort(np.lexsort((np.arange(nb), -blocks.astype(np.int64)))[:C])
        assert np.array_equal(c[t, :len(want)], want) and (c[t, len(want):] == -1).all(), f"cand row {t}"
    cons = d.indexer_topk(*args, be.put(np.zeros((T, K), np.int32)), cand=cand, candidate_mode=2, **kw)
    cons = be.get(cons)
    src = be.get(src)
    for t in range(T):
        n = (pos[t] + 1) if valid[t] else 0
        allowed = np.zeros(max(n, 1), bool)
        for g in c[t][c[t] >= 0]:
            allowed[8 * g:min(8 * g + 8, n)] = True
        masked = np.where(allowed[:n], logits[t, :n], -np.inf).astype(np.float32)
        want = select_model(masked, n, K) if n > 0 else np.full(K, -1, np.int32)
        if n > 0 and allowed[:n].sum() < K:  # short restricted rows: exactly the allowed columns
            idx = np.flatnonzero(allowed[:n])
            want = np.full(K, -1, np.int32)
            want[:len(idx)] = idx
        assert np.array_equal(cons[t], want), f"consumer row {t}"
    assert not np.array_equal(cons, src), "the restriction changed nothing"
