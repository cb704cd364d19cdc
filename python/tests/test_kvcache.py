"""kvcache on the host path: what the binding adds to the C reference (descriptors from tensor
shapes and strides, page geometry from the cache tensor, outputs written in place, numpy and
torch alike), bit for bit against dsv4_<op>_ref called directly on dense arrays. The record
format itself is checked by tests/kvcache against an independent model and known answers."""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm

POISON = 0xA5


def _insert_case(rng, T=96, P=64, pages=5):
    """V4 page (P = 64): T rows into shuffled slots, some skipped (-1, past the cache)."""
    stride = sm.page_stride(P)
    cache = rng.integers(0, 256, size=(pages, stride), dtype=np.uint8)  # poison
    k = sm.rng_bf16(rng, (T + 3, 512), -8, 6, zero_every=50)  # 3 padding rows past slot_mapping
    k[0, :64] = 0  # an all-zero block: the 1e-4 amax floor
    k[1, 64:128] = sm.f32_to_bf16(np.full(64, 3e-6, np.float32))  # a block below the floor
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    slots[5], slots[9] = -1, pages * P + 7
    return cache, k, slots, P


def cache_view(be, cache, layout, P):
    """The binding's cache tensor holding the pages of the dense [pages, stride] `cache`:
    (tensor, keyword arguments, read), read() returning the pages as [pages, stride] numpy
    after checking that no byte outside them was written."""
    pages, stride = cache.shape
    if layout == "flat":  # 1-D bytes with an explicit page stride
        t = be.put(cache.reshape(-1))
        return t, dict(page_stride_bytes=stride), lambda: be.get(t).reshape(pages, stride)
    if layout == "records":  # [pages, P, 584]: no page padding, page stride P * 584
        t = be.put(cache[:, :P * sm.RECORD].reshape(pages, P, sm.RECORD))
        return t, {}, lambda: np.concatenate([be.get(t).reshape(pages, -1), cache[:, P * sm.RECORD:]], axis=1)
    if layout == "padded":  # pages inside wider rows: the page stride is not the tensor's width
        view, whole = oracle.embed(be, cache, 64, POISON)

        def read():
            w = be.get(whole)
            assert (w[:, stride:] == POISON).all(), "bytes between pages were written"
            return w[:, :stride]
        return view, {}, read
    t = be.put(cache)
    return t, {}, lambda: be.get(t)


@pytest.mark.parametrize("layout", ["dense", "padded", "flat", "records"])
def test_kv_insert(be, rng, layout):
    cache, k, slots, P = _insert_case(rng)
    want = cache.copy()
    oracle.ref("kv_insert", dict(num_tokens=len(slots), page_tokens=P, page_stride_bytes=cache.shape[1],
                                 num_pages=cache.shape[0]), k=k, slot_mapping=slots, cache=want)
    assert not np.array_equal(want, cache), "the reference wrote nothing"
    kt = oracle.embed(be, k, 8, 0x7E7E)[0] if layout == "padded" else be.put(k)  # row stride 520
    c, kw, read = cache_view(be, cache, layout, P)
    assert d.kv_insert(kt, be.put(slots), c, page_tokens=P, **kw) is c
    oracle.assert_bits(read(), want, f"kv_insert cache ({layout})")
    assert np.array_equal(be.get(kt), k), "kv_insert modified its input"


@pytest.mark.parametrize("heads,padded,layout", [(16, 16, "dense"), (8, 16, "dense"), (8, 16, "padded"),
                                                 (16, 16, "records")])
def test_kv_swa_write(be, rng, heads, padded, layout):
    """V4.1 SWA page (P = 32); heads >= num_heads of q are written as zeros."""
    P, pages, N, n_ins, max_pos, eps = 32, 3, 12, 10, 300, 1e-6
    cache = rng.integers(0, 256, size=(pages, sm.page_stride(P)), dtype=np.uint8)
    q = sm.rng_bf16(rng, (N, padded, 512), -6, 3)
    kv = sm.rng_bf16(rng, (N, 512), -6, 3)
    pos = rng.integers(0, max_pos, N).astype(np.int64)
    slots = rng.permutation(pages * P)[:n_ins].astype(np.int64)
    slots[3] = -1
    cs = sm.rope_table(rng, max_pos)
    want_q, want_cache = q.copy(), cache.copy()
    oracle.ref("kv_swa_write", dict(num_tokens=N, num_insert=n_ins, num_heads=heads, num_heads_padded=padded,
                                    max_position=max_pos, page_tokens=P, page_stride_bytes=cache.shape[1],
                                    num_pages=pages, eps=eps),
               q=want_q, kv=kv, position_ids=pos, slot_mapping=slots, cos_sin_cache=cs, cache=want_cache)
    if layout == "padded":  # q's heads inside a wider head dimension, rows of q and kv padded
        buf = np.full((N, padded + 3, 520), 0x7E7E, np.uint16)
        buf[:, 1:padded + 1, :512] = q
        whole = be.put(buf)
        qt, kvt = whole[:, 1:padded + 1, :512], oracle.embed(be, kv, 8, 0)[0]
    else:
        qt, kvt = be.put(q), be.put(kv)
    c, kw, read = cache_view(be, cache, layout, P)
    d.kv_swa_write(qt, kvt, be.put(pos), be.put(slots), be.put(cs), c, page_tokens=P, eps=eps, num_heads=heads, **kw)
    oracle.assert_bits(be.get(qt), want_q, f"kv_swa_write q ({layout})")
    oracle.assert_bits(read(), want_cache, f"kv_swa_write cache ({layout})")
    if layout == "padded":
        buf[:, 1:padded + 1, :512] = want_q
        oracle.assert_bits(be.get(whole), buf, "q with the elements around it (those must stay)")


def test_kv_swa_write_skip_q_norm(be, rng):
    """V4.1 mode on the canonical layout: q only rotated (dims < 448 keep their bits), padding
    heads zeroed; q and the cache against the reference in the same mode."""
    P, pages, N, n_ins, heads, padded, max_pos = 32, 3, 12, 10, 6, 8, 300
    cache = rng.integers(0, 256, size=(pages, sm.page_stride(P)), dtype=np.uint8)
    q = sm.rng_bf16(rng, (N, padded, 512), -6, 3)
    kv = sm.rng_bf16(rng, (N, 512), -6, 3)
    pos = rng.integers(0, max_pos, N).astype(np.int64)
    slots = rng.permutation(pages * P)[:n_ins].astype(np.int64)
    cs = sm.rope_table(rng, max_pos)
    want_q, want_cache = q.copy(), cache.copy()
    oracle.ref("kv_swa_write", dict(num_tokens=N, num_insert=n_ins, num_heads=heads, num_heads_padded=padded,
                                    max_position=max_pos, page_tokens=P, page_stride_bytes=cache.shape[1],
                                    num_pages=pages, skip_q_norm=1),
               q=want_q, kv=kv, position_ids=pos, slot_mapping=slots, cos_sin_cache=cs, cache=want_cache)
    assert np.array_equal(want_q[:, :heads, :448], q[:, :heads, :448]), "the reference rewrote NoPE dims"
    assert not np.array_equal(want_q[:, :heads, 448:], q[:, :heads, 448:]), "the reference rotated nothing"
    qt, c = be.put(q), be.put(cache)
    d.kv_swa_write(qt, be.put(kv), be.put(pos), be.put(slots), be.put(cs), c, page_tokens=P, num_heads=heads,
                   skip_q_norm=True)
    oracle.assert_bits(be.get(qt), want_q, "kv_swa_write q (skip_q_norm)")
    oracle.assert_bits(be.get(c), want_cache, "kv_swa_write cache (skip_q_norm)")
    with pytest.raises(ValueError, match="eps is required"):
        d.kv_swa_write(qt, be.put(kv), be.put(pos), be.put(slots), be.put(cs), c, page_tokens=P)


@pytest.mark.parametrize("reqs,P,with_gather_lens,layout", [(1, 64, False, "dense"), (3, 32, True, "padded"),
                                                            (4, 256, False, "flat"), (3, 64, True, "records")])
def test_kv_gather(be, rng, reqs, P, with_gather_lens, layout):
    """Written rows bit-exact, the other rows of out untouched; some page ids out of range."""
    width = 4
    pages = reqs * width + 1
    cache = sm.random_cache(rng, pages, P)
    table = (1 + rng.permutation(pages - 1)[:reqs * width]).reshape(reqs, width).astype(np.int32)
    table[0, 1], table[-1, -1] = pages + 3, -2
    seq = rng.integers(1, width * P, reqs).astype(np.int32)
    glen = np.minimum(seq, rng.integers(0, 3 * P, reqs)).astype(np.int32) if with_gather_lens else None
    M, offset = width * P + 8, 5
    out = oracle.poison(rng, (reqs + 1, M, 512), np.uint16)
    want = out.copy()
    oracle.ref("kv_gather", dict(num_reqs=reqs, block_table_width=width, out_rows=M, offset=offset, page_tokens=P,
                                 page_stride_bytes=cache.shape[1], num_pages=pages),
               cache=cache, seq_lens=seq, gather_lens=glen, block_table=table, out=want)
    if layout == "padded":  # out rows padded and offset in a bigger slab, block table rows padded
        buf = np.full((reqs + 1, M + 2, 520), 0x7E7E, np.uint16)
        buf[:, 1:M + 1, :512] = out
        whole = be.put(buf)
        ot, tt = whole[:, 1:M + 1, :512], oracle.embed(be, table, 3, -1)[0]
    else:
        ot, tt = be.put(out), be.put(table)
    c, kw, read = cache_view(be, cache, layout, P)
    gl = None if glen is None else be.put(glen)
    d.kv_gather(c, be.put(seq), tt, ot, page_tokens=P, offset=offset, gather_lens=gl, max_gather_len=int(seq.max()),
                **kw)
    oracle.assert_bits(be.get(ot), want, f"kv_gather out ({layout})")
    oracle.assert_bits(read(), cache, "kv_gather cache (an input)")
    if layout == "padded":
        buf[:, 1:M + 1, :512] = want
        oracle.assert_bits(be.get(whole), buf, "out with the elements around it (those must stay)")


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("layout", ["dense", "padded"])
def test_kv_rope_insert(be, rng, ratio, layout):
    from deepinfer_sm80.kvcache import kv_rope_insert
    cache, x, slots, P = _insert_case(rng)
    T, max_pos = len(slots), 80
    pos = rng.integers(-2, max_pos + 4, size=T).astype(np.int64)
    cs = rng.standard_normal((max_pos, 64)).astype(np.float32)
    want = cache.copy()
    oracle.ref("kv_rope_insert", dict(num_tokens=T, page_tokens=P, page_stride_bytes=cache.shape[1],
                                      num_pages=cache.shape[0], ratio=ratio, max_position=max_pos),
               latent=x, positions=pos, slot_mapping=slots, cos_sin_cache=cs, cache=want)
    assert not np.array_equal(want, cache), "the reference wrote nothing"
    xt = oracle.embed(be, x, 8, 0x7E7E)[0] if layout == "padded" else be.put(x)
    c, kw, read = cache_view(be, cache, layout, P)
    assert kv_rope_insert(xt, be.put(pos), be.put(slots), be.put(cs), c, page_tokens=P, ratio=ratio, **kw) is c
    oracle.assert_bits(read(), want, f"kv_rope_insert cache (r={ratio}, {layout})")
    assert np.array_equal(be.get(xt), x), "kv_rope_insert modified its input"
