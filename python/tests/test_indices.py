"""indices on the host path: known answers computed by hand from include/dsv4/indices.h, and
random model-shaped cases, dense and strided, against the numpy models of the header's
pseudo-code (tests/indices checks the references on known answers only, so these models are
their one independent check on random input)."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm

I32 = np.int32


def a32(x):
    return np.array(x, I32)


def prefix(row, n):
    return row[:n].tolist()


def test_translate_known_answers(be):
    topk = a32([[0, 5, 11, -1], [2, 3, -1, -1], [7, 1, 0, 4]])
    table = a32([[7, 3, 9, 0], [4, 6, 0, 0]])
    args = (be.put(topk), be.put(a32([0, 0, 1])), be.put(table), be.put(np.array([1, 0, 1], np.uint8)))
    g, lens = d.topk_translate(*args, page_tokens=4)
    assert be.get(g).tolist() == [[28, 13, 39, -1], [30, 31, -1, -1], [27, 17, 16, 24]]
    assert be.get(lens).tolist() == [3, 0, 4]
    lens, indptr, packed = d.topk_translate_packed(*args, page_tokens=4)
    assert be.get(indptr).tolist() == [0, 3, 3, 7]
    assert be.get(packed)[:7].tolist() == [28, 13, 39, 27, 17, 16, 24]


def test_decode_swa_known_answers(be):
    t2r, valid = a32([0, 0]), np.ones(2, bool)
    out, lens = d.decode_swa_indices(be.put(t2r), be.put(a32([5, 1])), be.put(valid), be.put(a32([[5, 2]])),
                                     window=4, page_tokens=4)
    assert be.get(out).tolist() == [[22, 23, 8, 9], [20, 21, -1, -1]] and be.get(lens).tolist() == [4, 2]
    out, _ = d.decode_swa_indices(be.put(a32([0])), be.put(a32([9])), be.put(np.ones(1, bool)),
                                  be.put(a32([[5, 2, 8]])), window=4, page_tokens=4)
    assert be.get(out).tolist() == [[10, 11, 32, 33]]


BASIC = dict(topk=[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], qsl=[0, 2, 3], seq=[8, 10], gat=[8, 10], W=4, r=2,
            K=4, M=64, N=16, want=[[1, 2, 3, 19, 20, 21, 22], [5, 6, 7, 8, 20, 21, 22, 23],
                                   [73, 74, 75, 76, 86, 87, 88, 89]])
REBASED = dict(topk=[[0, 1, 2, -1]] * 3 + [[3, 0, 1, 2], [1, 3, 0, 2], [2, 1, 3, 0], [0, 1, 2, 3], [4, 0, 2, 3]],
            qsl=[17, 25], seq=[20], gat=[11], W=4, r=4, K=4, M=64, N=8,
            want=[[0, 1, 2, 8, 9, 10, 11], [0, 1, 2, 9, 10, 11, 12], [0, 1, 2, 10, 11, 12, 13],
                  [3, 0, 1, 2, 11, 12, 13, 14], [1, 3, 0, 2, 12, 13, 14, 15], [2, 1, 3, 0, 13, 14, 15, 16],
                  [0, 1, 2, 3, 14, 15, 16, 17], [4, 0, 2, 3, 15, 16, 17, 18]])
INVALID = dict(topk=[[1, 0, -1, -1], [3, -1, 1, 0], [5, 9, -7, 2]], qsl=[0, 1, 3], seq=[4, 12], gat=[4, 6], W=4, r=2,
            K=4, M=32, N=8, want=[[1, 0, 8, 9, 10, 11], [35, -1, 33, 32, 41, 42, 43, 44],
                                  [37, -1, -1, 34, 42, 43, 44, 45]],
            want_v4=[[1, 0, 8, 9, 10, 11], [35, 31, 33, 32, 41, 42, 43, 44], [37, 41, 25, 34, 42, 43, 44, 45]])
RATIO1 = dict(topk=[[0, 2, 1, 3], [4, 0, 1, 2]], qsl=[0, 2], seq=[6], gat=[6], W=4, r=1, K=4, M=64, N=16,
            want=[[0, 2, 1, 3, 17, 18, 19, 20], [4, 0, 1, 2, 18, 19, 20, 21]])


@pytest.mark.parametrize("kat,mode", [(BASIC, 0), (REBASED, 0), (INVALID, 0), (INVALID, 1), (RATIO1, 0)],
                         ids=["basic", "rebased", "invalid-v4.1", "invalid-v4", "ratio1"])
def test_combine_known_answers(be, kat, mode):
    comb, lens = d.combine_topk_swa(be.put(a32(kat["topk"])), be.put(a32(kat["qsl"])), be.put(a32(kat["seq"])),
                                    be.put(a32(kat["gat"])), topk=kat["K"], window=kat["W"], ratio=kat["r"],
                                    slab_rows=kat["M"], swa_row0=kat["N"], mode=mode)
    comb, lens = be.get(comb), be.get(lens)
    want = kat["want_v4"] if mode == 1 else kat["want"]
    assert comb.shape[1] == 128
    assert lens.tolist() == [len(w) for w in want]
    for t, w in enumerate(want):
        assert comb[t].tolist() == w + [-1] * (128 - len(w)), f"row {t}"


def test_combine_swa_only_known_answer(be):
    comb, lens = d.combine_topk_swa(None, be.put(a32([0, 2, 5])), be.put(a32([2, 200])), be.put(a32([2, 130])),
                                    topk=0, window=128, ratio=0, slab_rows=1000, swa_row0=0, num_tokens=5)
    comb, lens = be.get(comb), be.get(lens)
    assert lens.tolist() == [1, 2, 128, 128, 128]
    assert prefix(comb[0], 2) == [0, -1] and prefix(comb[1], 3) == [0, 1, -1]
    for t, start in ((2, 1000), (3, 1001), (4, 1002)):
        assert comb[t].tolist() == list(range(start, start + 128))


def _translate_case(rng, T=64, K=512, R=4, width=40, P=64):
    topk = rng.integers(-1, width * P + 50, size=(T, K)).astype(I32)  # some past the table
    topk[:, K // 2:] = -1
    t2r = rng.integers(-1, R + 1, T).astype(I32)  # some requests out of range
    table = rng.integers(0, 1000, size=(R, width)).astype(I32)
    valid = rng.integers(0, 4, T).astype(bool)
    return topk, t2r, table, valid, P


@pytest.mark.parametrize("layout", ["dense", "strided"])
def test_translate_random(be, rng, layout):
    """strided: padded input rows, a uint8 mask, outputs passed with padded rows; what lies
    outside an output (row padding, the packed tail past indptr[T]) keeps its poison."""
    topk, t2r, table, valid, P = _translate_case(rng)
    T, K = topk.shape
    wg, wl = sm.translate_model(topk, t2r, table, valid, P)
    ip = np.concatenate([[0], np.cumsum(wl)])
    dense, packed_out = {}, {}
    if layout == "strided":
        args = [oracle.embed(be, topk, 5, -9)[0], be.put(t2r), oracle.embed(be, table, 3, -9)[0],
                be.put(valid.astype(np.uint8))]
        g_view, g_whole = oracle.embed(be, np.full((T, K), -7, I32), 4, -7)
        dense = dict(global_indices=g_view, lens=be.put(np.full(T, -7, I32)))
        packed_out = dict(lens=be.put(np.full(T, -7, I32)), indptr=be.put(np.full(T + 1, -7, I32)),
                          packed=be.put(np.full(T * K + 3, -7, I32)))
    else:
        args = [be.put(x) for x in (topk, t2r, table, valid)]
    g, lens = d.topk_translate(*args, page_tokens=P, **dense)
    assert np.array_equal(be.get(g), wg) and np.array_equal(be.get(lens), wl)
    if dense:
        assert g is dense["global_indices"] and (be.get(g_whole)[:, K:] == -7).all(), "row padding was written"
    lens, indptr, packed = d.topk_translate_packed(*args, page_tokens=P, **packed_out)
    assert np.array_equal(be.get(lens), wl) and np.array_equal(be.get(indptr), ip)
    want_packed = np.concatenate([wg[t, :wl[t]] for t in range(len(wl))])
    assert np.array_equal(be.get(packed)[:ip[-1]], want_packed)
    if packed_out:
        assert (be.get(packed)[ip[-1]:] == -7).all(), "packed entries past indptr[T] were written"


@pytest.mark.parametrize("ratio,topk_w,mode,layout", [(0, 0, 0, "dense"), (1, 512, 0, "strided"), (2, 512, 0, "dense"),
                                                      (4, 512, 1, "strided"), (4, 1024, 0, "dense")])
def test_combine_random(be, rng, ratio, topk_w, mode, layout):
    """4 requests of one prefill chunk, standard gather_lens, some -1 and out-of-range values;
    strided: padded top-k rows, combined passed with padded rows (the padding must stay)."""
    W, R = 128, 4
    qlen = rng.integers(1, 40, R)
    prefix_len = rng.integers(0, 3000, R)
    seq = (qlen + prefix_len).astype(I32)
    gat = (qlen + np.minimum(prefix_len, W - 1)).astype(I32)
    qsl = (100 + np.concatenate([[0], np.cumsum(qlen)])).astype(I32)
    T = int(qlen.sum())
    N = int(seq.max()) // max(ratio, 1) if ratio else 0
    M = N + W + 64
    topk = rng.integers(-2, N + 5, size=(T, topk_w + 3)).astype(I32) if topk_w else None
    want, wl = sm.combine_model(topk, qsl, seq, gat, T, topk_w, W, ratio, M, N, v4=mode == 1)
    C = want.shape[1]
    assert d.combine_cols(topk_w, W) == C
    out = {}
    if layout == "strided":
        tk = None if topk is None else oracle.embed(be, topk, 6, -9)[0]
        c_view, c_whole = oracle.embed(be, np.full((T, C), -7, I32), 4, -7)
        out = dict(combined=c_view, combined_lens=be.put(np.full(T, -7, I32)))
    else:
        tk = None if topk is None else be.put(topk)
    comb, lens = d.combine_topk_swa(tk, be.put(qsl), be.put(seq), be.put(gat), topk=topk_w, window=W, ratio=ratio,
                                    slab_rows=M, swa_row0=N, mode=mode, num_tokens=T, **out)
    assert np.array_equal(be.get(comb), want) and np.array_equal(be.get(lens), wl)
    if out:
        assert comb is out["combined"] and (be.get(c_whole)[:, C:] == -7).all(), "row padding was written"


@pytest.mark.parametrize("layout", ["dense", "strided"])
def test_decode_swa_random(be, rng, layout):
    """dense: vLLM's [T, 1, W] output; strided: padded block-table rows, a [T, W] output with
    padded rows (the padding must stay)."""
    T, R, width, W, P = 200, 8, 20, 128, 64
    t2r = rng.integers(-1, R + 1, T).astype(I32)
    pos = rng.integers(-2, width * P + 300, T).astype(I32)  # some pages past the table
    table = rng.integers(0, 5000, size=(R, width)).astype(I32)
    valid = rng.integers(0, 4, T).astype(np.uint8)
    want, wl = sm.decode_swa_model(t2r, pos, valid, table, W, P)
    if layout == "strided":
        tt = oracle.embed(be, table, 3, -9)[0]
        o_view, o_whole = oracle.embed(be, np.full((T, W), -7, I32), 4, -7)
    else:
        tt, o_view = be.put(table), be.put(np.zeros((T, 1, W), I32))
    out, lens = d.decode_swa_indices(be.put(t2r), be.put(pos), be.put(valid), tt, window=W, page_tokens=P,
                                     swa_indices=o_view)
    assert np.array_equal(be.get(out).reshape(T, W), want) and np.array_equal(be.get(lens), wl)
    if layout == "strided":
        assert (be.get(o_whole)[:, W:] == -7).all(), "row padding was written"
