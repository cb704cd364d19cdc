"""The CUDA path: every operator on CUDA tensors against the C reference on the same inputs
(bit-exact for data movement and the mHC residual, the header's tolerance for attention and
gates), torch streams, workspaces, and CUDA-graph capture + replay with new inputs.

Skipped (reported as skipped) without torch or a CUDA device. Run on the GPU machine with
    python3 -m pytest python/tests -q
"""
import numpy as np
import pytest

import deepinfer_sm80 as d
import spec_model as sm
from conftest import Backend, torch

pytestmark = pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                reason="needs torch with a CUDA device")

HOST = Backend("numpy")


@pytest.fixture
def gpu():
    return Backend("cuda", device="cuda")


def both(fn, gpu, *inputs, **kw):
    """Run fn on host copies (C reference) and on CUDA copies (kernels) of the numpy inputs.
    `inputs` may hold None; outputs are returned as numpy (host result, device result)."""
    host = fn(*[None if x is None else HOST.put(x) for x in inputs], **kw)
    dev = fn(*[None if x is None else gpu.put(x) for x in inputs], **kw)
    torch.cuda.synchronize()
    conv = lambda r, be: {k: be.get(v) for k, v in r.items()} if isinstance(r, dict) else (  # noqa: E731
        tuple(be.get(v) for v in r) if isinstance(r, tuple) else be.get(r))
    return conv(host, HOST), conv(dev, gpu)


def assert_bits(got, want, what):
    bad = np.argwhere(np.asarray(got) != np.asarray(want))
    assert bad.size == 0, f"{what}: {len(bad)} elements differ from the C reference, first at {bad[:3].tolist()}"


def assert_ulp(got, want, what, ulp=1):
    u = sm.ulp_diff_bf16(got, want)
    i = np.unravel_index(np.argmax(u), u.shape)
    assert u.max() <= ulp, f"{what}: {u.max()} bf16 ulps from the C reference at {i} (allowed {ulp})"


# ---- kvcache -------------------------------------------------------------------------------
def test_kv_insert(gpu, rng):
    from test_kvcache import _insert_case

    cache, k, slots, P = _insert_case(rng, T=3000, P=64, pages=60)

    def run(k, slots, cache):
        return d.kv_insert(k, slots, cache, page_tokens=P)
    host, dev = both(run, gpu, k, slots, cache)
    assert_bits(dev, host, "kv_insert cache bytes")


@pytest.mark.parametrize("heads,padded", [(64, 64), (32, 32), (16, 24)])
def test_kv_swa_write(gpu, rng, heads, padded):
    P, pages, N, max_pos = 32, 40, 512, 4096
    cache = rng.integers(0, 256, size=(pages, sm.page_stride(P)), dtype=np.uint8)
    q = sm.rng_bf16(rng, (N, padded, 512), -6, 3)
    kv = sm.rng_bf16(rng, (N, 512), -6, 3)
    pos = rng.integers(0, max_pos, N).astype(np.int64)
    slots = rng.permutation(pages * P)[:N - 7].astype(np.int64)
    slots[::9] = -1
    cs = sm.rope_table(rng, max_pos)

    def run(q, kv, pos, slots, cs, cache):
        return d.kv_swa_write(q, kv, pos, slots, cs, cache, page_tokens=P, eps=1e-6, num_heads=heads)
    (hq, hc), (gq, gc) = both(run, gpu, q, kv, pos, slots, cs, cache)
    assert_bits(gc, hc, "kv_swa_write cache bytes")
    assert_ulp(gq, hq, "kv_swa_write q (contract: <= 1 bf16 ulp)")


@pytest.mark.parametrize("reqs,P,glen", [(1, 64, False), (4, 64, True), (4, 256, False)])
def test_kv_gather(gpu, rng, reqs, P, glen):
    width = 64
    pages = reqs * width + 1
    cache = sm.random_cache(rng, pages, P)
    table = (1 + rng.permutation(pages - 1)[:reqs * width]).reshape(reqs, width).astype(np.int32)
    seq = rng.integers(P, width * P, reqs).astype(np.int32)
    gl = np.minimum(seq, rng.integers(0, 4 * P, reqs)).astype(np.int32) if glen else None
    out = rng.integers(0, 65536, size=(reqs, width * P + 16, 512)).astype(np.uint16)

    def run(cache, seq, table, out, gl):
        return d.kv_gather(cache, seq, table, out, page_tokens=P, offset=3, gather_lens=gl)
    host, dev = both(run, gpu, cache, seq, table, out, gl)
    assert_bits(dev, host, "kv_gather (written rows and untouched poison)")


# ---- indices -------------------------------------------------------------------------------
def test_translate_and_packed(gpu, rng):
    from test_indices import _translate_case

    topk, t2r, table, valid, bs = _translate_case(rng, T=2048, K=512, R=16, width=300)
    host, dev = both(lambda *a: d.topk_translate(*a, page_tokens=bs), gpu, topk, t2r, table, valid)
    assert_bits(dev[0], host[0], "topk_translate indices")
    assert_bits(dev[1], host[1], "topk_translate lens")
    host, dev = both(lambda *a: d.topk_translate_packed(*a, page_tokens=bs), gpu, topk, t2r, table, valid)
    n = int(host[1][-1])
    assert_bits(dev[0], host[0], "packed lens")
    assert_bits(dev[1], host[1], "packed indptr")
    assert_bits(dev[2][:n], host[2][:n], "packed values")


def combine_case(rng, T_target=1536, ratio=4, topk_w=512, R=4):
    W = 128
    qlen = rng.multinomial(T_target - R, np.ones(R) / R) + 1
    prefix_len = rng.integers(0, 20000, R)
    seq = (qlen + prefix_len).astype(np.int32)
    gat = (qlen + np.minimum(prefix_len, W - 1)).astype(np.int32)
    qsl = (7 + np.concatenate([[0], np.cumsum(qlen)])).astype(np.int32)
    N = int(seq.max()) // max(ratio, 1) if ratio else 0
    T = int(qlen.sum())
    topk = rng.integers(-2, N + 5, size=(T, topk_w)).astype(np.int32) if topk_w else None
    return dict(topk=topk, qsl=qsl, seq=seq, gat=gat, T=T, W=W, ratio=ratio, K=topk_w, M=N + W + T_target, N=N)


@pytest.mark.parametrize("ratio,topk_w,mode", [(0, 0, 0), (1, 512, 0), (2, 512, 0), (4, 1024, 1)])
def test_combine(gpu, rng, ratio, topk_w, mode):
    c = combine_case(rng, ratio=ratio, topk_w=topk_w)

    def run(topk, qsl, seq, gat):
        return d.combine_topk_swa(topk, qsl, seq, gat, topk=c["K"], window=c["W"], ratio=ratio, slab_rows=c["M"],
                                  swa_row0=c["N"], mode=mode, num_tokens=c["T"])
    host, dev = both(run, gpu, c["topk"], c["qsl"], c["seq"], c["gat"])
    assert_bits(dev[0], host[0], "combined")
    assert_bits(dev[1], host[1], "combined_lens")


def test_decode_swa(gpu, rng):
    T, R, width = 2048, 64, 100
    t2r = rng.integers(-1, R + 1, T).astype(np.int32)
    pos = rng.integers(-2, width * 64 + 200, T).astype(np.int32)
    table = rng.integers(0, 9000, size=(R, width)).astype(np.int32)
    valid = rng.integers(0, 4, T).astype(bool)
    host, dev = both(lambda *a: d.decode_swa_indices(*a, window=128, page_tokens=64), gpu, t2r, pos, valid, table)
    assert_bits(dev[0], host[0], "swa_indices")
    assert_bits(dev[1], host[1], "swa_lens")


# ---- attention -----------------------------------------------------------------------------
def _within_tolerance(got_bf16, ref64, maxk, what):
    sm.assert_attention_close(got_bf16, ref64, maxk, what, nan_positions=True)


def test_sparse_mla_decode_configs_and_splits(gpu, rng):
    from test_attention import decode_case, run_decode

    c = decode_case(rng, T=16, H=64)
    ref = np.zeros((16, 64, 512))
    run_decode(HOST, c, ref_out=ref)
    maxk = max(np.abs(r).max() for t in range(16)
               for r in [sm.decode_rows(c["cs"], c["P_s"], c["mi"][t], c["ml"][t]),
                         sm.decode_rows(c["cc"], c["P_c"], c["ei"][t], c["el"][t])] if len(r))
    outs = {}
    for config in (0, 1, 2, 3, 4, 5):
        for splits in (0, 1, 2, 4, 16):
            out = gpu.get(run_decode(gpu, c, config=config, num_splits=splits))
            _within_tolerance(out, ref, maxk, f"decode config={config} num_splits={splits}")
            outs[(config, splits)] = out
        merged = gpu.get(run_decode(gpu, c, config=config, num_splits=1, force_merge=True))
        assert_bits(merged, outs[(config, 1)], f"config {config}: S=1 direct write vs partial+merge (contract: bitwise)")
    again = gpu.get(run_decode(gpu, c, num_splits=4))
    assert_bits(again, outs[(0, 4)], "decode determinism (two runs)")


@pytest.mark.parametrize("H", [64, 32, 16])
def test_sparse_mla_decode_heads(gpu, rng, H):
    from test_attention import decode_case, decode_model, run_decode

    c = decode_case(rng, T=8, H=H)
    want, rows = decode_model(c)
    maxk = max(np.abs(r).max() for r in rows if len(r))
    _within_tolerance(gpu.get(run_decode(gpu, c)), want, maxk, f"decode H={H}")


@pytest.mark.parametrize("H,config", [(64, 0), (32, 0), (16, 0), (64, 1), (64, 2), (64, 3)])
def test_sparse_mla_prefill(gpu, rng, H, config):
    from test_attention import prefill_case, prefill_model

    c = prefill_case(rng, T=48, H=H, R=4, M=700, C=640)
    want, rows = prefill_model(c)
    maxk = max(np.abs(r).max() for r in rows if len(r))
    out = d.sparse_mla_prefill(gpu.put(c["q"]), gpu.put(c["kv"]), gpu.put(c["ids"]), gpu.put(c["lens"]),
                               sink=gpu.put(c["sink"]), config=config)
    _within_tolerance(gpu.get(out), want, maxk, f"prefill H={H} config={config}")


# ---- mHC -----------------------------------------------------------------------------------
MHC_H = 5120  # V4.1-Flash


@pytest.mark.parametrize("T", [1, 6, 64])
def test_mhc_post(gpu, rng, T):
    from test_mhc import seam_inputs

    c = seam_inputs(rng, T, MHC_H)
    host, dev = both(lambda *a: d.mhc_post(*a, with_sqrsum=True), gpu, c["x"], c["R"], c["post"], c["comb"])
    assert_bits(dev[0], host[0], "mhc_post residual")
    ref = (sm.bf16_to_f32(host[0]).astype(np.float64) ** 2).reshape(T, -1).sum(1)
    assert np.allclose(dev[1], ref, rtol=1e-5, atol=0), "sqrsum beyond 1e-5 relative"


@pytest.mark.parametrize("variant,norm", [(0, True), (1, True), (0, False)])
def test_mhc_collapse(gpu, rng, variant, norm):
    from test_mhc import seam_inputs

    c = seam_inputs(rng, 64, MHC_H)
    host, dev = both(lambda R, p, w: d.mhc_collapse(R, p, w, variant=variant, with_aux=True), gpu, c["R"],
                     c["pre_mix"], c["w"] if norm else None)
    assert_bits(dev[1], host[1], "collapse aux")
    if norm:
        assert_ulp(dev[0], host[0], "collapse + RMSNorm (contract: <= 1 ulp)")
    else:
        assert_bits(dev[0], host[0], "collapse")


def test_mhc_fn_bcast(gpu, rng):
    fn, _, _ = sm.mhc_params(rng, MHC_H)
    host, dev = both(d.mhc_fn_bcast, gpu, fn)
    assert_bits(dev, host, "fn_bcast")


def test_mhc_fn_split(gpu, rng):
    fn, _, _ = sm.mhc_params(rng, MHC_H)
    host, dev = both(d.mhc_fn_split, gpu, fn)
    assert_bits(dev, host, "fn_split")


def _check_gates(res, X, fn, scale, base, gate, sqrsum=None, what=""):
    sm.check_gates(res, X, fn, scale, base, gate, sqrsum, what)


@pytest.mark.parametrize("T,route", [(6, 0), (6, 2), (12, 1), (64, 0), (300, 0)])
def test_mhc_gates(gpu, rng, T, route):
    from test_mhc import GATE41, seam_inputs

    c = seam_inputs(rng, T, MHC_H)
    res = d.mhc_gates(gpu.put(c["R"]), gpu.put(c["fn"]), gpu.put(c["scale"]), gpu.put(c["base"]), route=route,
                      with_mix=True)
    res = {k: gpu.get(v) for k, v in res.items()}
    _check_gates(res, c["R"], c["fn"], c["scale"], c["base"], GATE41, what=f"gates T={T} route={route}")


@pytest.mark.parametrize("variant,T", [(0, 6), (0, 64), (1, 12)])
def test_mhc_pre(gpu, rng, variant, T):
    from test_mhc import GATE4, GATE41, seam_inputs

    c = seam_inputs(rng, T, MHC_H)
    gate = GATE41 if variant == 0 else GATE4
    pre_mix = c["pre_mix"] if variant == 0 else None

    def run(R, fn, scale, base, pm, w):
        return d.mhc_pre(R, fn, scale, base, variant=variant, pre_mix=pm, norm_weight=w, with_aux=True, with_mix=True)
    host, dev = both(run, gpu, c["R"], c["fn"], c["scale"], c["base"], pre_mix, c["w"])
    _check_gates(dev, c["R"], c["fn"], c["scale"], c["base"], gate, what="mhc_pre gates")
    assert_bits(dev["aux"], host["aux"], "mhc_pre aux")
    # V4.1 collapses with the incoming pre-mix (same on both sides): <= 1 ulp after the norm.
    # V4 collapses with its freshly computed pre, which differs from the reference's by ~1e-6:
    # that can flip one bf16 rounding of the collapse before the norm adds its own: <= 2 ulps.
    assert_ulp(dev["layer_input"], host["layer_input"], "mhc_pre layer_input", 1 if variant == 0 else 2)


def test_mhc_pre_broadcast(gpu, rng):
    from test_mhc import GATE41, seam_inputs

    c = seam_inputs(rng, 6, MHC_H)
    fnb = d.mhc_fn_bcast(c["fn"])
    host, dev = both(lambda e, f, s, b, w: d.mhc_pre(e, f, s, b, norm_weight=w, with_mix=True), gpu, c["x"], fnb,
                     c["scale"], c["base"], c["w"])
    assert_bits(dev["residual_out"], host["residual_out"], "broadcast copy")
    assert_ulp(dev["layer_input"], host["layer_input"], "first-layer layer_input")
    _check_gates(dev, c["x"], fnb, c["scale"], c["base"], GATE41, what="broadcast gates")


@pytest.mark.parametrize("variant,T,route", [(0, 1, 0), (0, 12, 0), (0, 16, 0), (0, 128, 0), (0, 12, 2), (1, 6, 0)])
def test_mhc_seam(gpu, rng, variant, T, route):
    from test_mhc import GATE4, GATE41, seam_inputs

    c = seam_inputs(rng, T, MHC_H)
    gate = GATE41 if variant == 0 else GATE4
    pre_mix = c["pre_mix"] if variant == 0 else None

    def run(x, R, post, comb, fn, scale, base, pm, w):
        return d.mhc_seam(x, R, post, comb, fn, scale, base, variant=variant, route=route, pre_mix=pm,
                          norm_weight=w, with_aux=True, with_mix=True)
    host, dev = both(run, gpu, *(c[k] for k in ("x", "R", "post", "comb", "fn", "scale", "base")), pre_mix, c["w"])
    assert_bits(dev["residual_out"], host["residual_out"], "seam residual_out (contract: bit-exact on every route)")
    assert_bits(dev["aux"], host["aux"], "seam aux")
    _check_gates(dev, host["residual_out"], c["fn"], c["scale"], c["base"], gate, what=f"seam T={T} route={route}")
    # fn split once (mhc_fn_split): the same bits in every output
    args = [gpu.put(a) for a in (c["x"], c["R"], c["post"], c["comb"], c["fn"], c["scale"], c["base"])]
    pm, w = (None if a is None else gpu.put(a) for a in (pre_mix, c["w"]))
    plain = run(*args, pm, w)
    split = d.mhc_seam(*args, variant=variant, route=route, pre_mix=pm, norm_weight=w, with_aux=True, with_mix=True,
                       fn_split=d.mhc_fn_split(args[4]))
    for k, v in plain.items():
        assert_bits(gpu.get(split[k]), gpu.get(v), f"seam {k} with fn_split")
    assert_ulp(dev["layer_input"], host["layer_input"], "seam layer_input", 1 if variant == 0 else 2)


# ---- streams, workspaces, devices ------------------------------------------------------------
# ---- compress and indexer -------------------------------------------------------------------
@pytest.mark.parametrize("ratio", [1, 2])
def test_compress(gpu, rng, ratio):
    from test_compress import _ratio2_rows

    T = 7
    kv = (rng.standard_normal((T, 512 * ratio)) * 3).astype(np.float32)
    gamma, latent = sm.rng_bf16(rng, (512,), -2, 1), np.full((T, 512), 0x7FC1, np.uint16)
    if ratio == 1:
        slot = rng.integers(-1, 50, size=T).astype(np.int64)
        host, dev = both(lambda k, g, l, s: (d.compress(k, g, l, ratio=1, eps=1e-6, slot=s),), gpu, kv, gamma,
                         latent, slot)
        assert_bits(dev[0], host[0], "compress latent (r=1)")
        return
    pos, qsl, ring_slot, ring, cap = _ratio2_rows(rng)

    def run(k, g, l, p, rs, q, r):
        d.compress(k, g, l, ratio=2, eps=1e-6, positions=p, ring_slot=rs, query_start_loc=q, ring=r, ring_cap=cap)
        return l, r
    host, dev = both(run, gpu, kv, gamma, latent, pos, ring_slot, qsl, ring)
    assert_ulp(dev[0], host[0], "compress latent (r=2: exp differs between host and device)", ulp=1)
    assert_bits(dev[1], host[1], "compress ring")


@pytest.mark.parametrize("ratio", [4, 128])
@pytest.mark.parametrize("head_dim", [512, 128])
def test_compress_v4(gpu, rng, ratio, head_dim):
    """The V4.0 compressor, fp8_ds_mla records (head 512) or indexer states (head 128): state and
    cache bit for bit against the C reference (the library's exp is the same on host and device)."""
    from test_compress import v4_case

    c, P = v4_case(rng, ratio, head_dim)
    names = ("kv_score", "ape", "positions", "state_slot", "req_idx", "block_table", "gamma", "cos_sin_cache",
             "slot_mapping", "state", "cache")
    host, dev = both(lambda *a: d.compress_v4(*a, ratio=ratio, eps=1e-6, page_tokens=P, head_dim=head_dim), gpu,
                     *[c[k] for k in names])
    assert_bits(dev[0], host[0], f"compress_v4 state (r={ratio}, N={head_dim})")
    assert_bits(dev[1], host[1], f"compress_v4 cache (r={ratio}, N={head_dim})")
    assert (host[1] != c["cache"]).any(), "the case wrote no record"


def test_inv_rope(gpu, rng):
    T, max_pos = 300, 64
    o = sm.rng_bf16(rng, (T, 16, 512), -6, 4)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    host, dev = both(lambda o, p, c: d.inv_rope(o, p, c, num_heads=12), gpu, o, pos, sm.rope_table(rng, max_pos))
    assert_bits(dev, host, "inv_rope")


@pytest.mark.parametrize("pinned", [False, True])
def test_engram_lookup(gpu, rng, pinned):
    T, D, rows = 200, 256, 500
    values = rng.integers(0, 256, size=(rows, D), dtype=np.uint8)
    scales = rng.integers(110, 140, size=(rows, D // 32), dtype=np.uint8)
    ids = rng.integers(-1, rows + 5, size=(T, 8)).astype(np.int32)
    out = np.zeros((T, 8, D), np.uint16)
    want = d.engram_lookup(values, scales, ids, out.copy())
    table = [torch.from_numpy(a) for a in (values, scales)]
    table = [t.pin_memory() for t in table] if pinned else [t.cuda() for t in table]
    got = d.engram_lookup(*table, gpu.put(ids), gpu.put(out))
    torch.cuda.synchronize()
    assert_bits(gpu.get(got), want, f"engram_lookup ({'pinned host' if pinned else 'device'} table)")


def test_indexer_q_and_k_store(gpu, rng):
    T, H, max_pos, P, pages = 100, 32, 256, 64, 4
    cs = sm.rope_table(rng, max_pos)
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    q, w_raw = sm.rng_bf16(rng, (T, H, 128), -8, 8), sm.rng_bf16(rng, (T, H), -2, 2)
    q8, w = np.zeros((T, H, 128), np.uint8), np.zeros((T, H), np.float32)
    host, dev = both(lambda *a: d.indexer_q(*a), gpu, q, w_raw, pos, cs, q8, w)
    assert_bits(dev[0], host[0], "indexer_q codes")
    assert_bits(dev[1].view(np.uint32), host[1].view(np.uint32), "indexer_q weights")
    cache = rng.integers(0, 256, size=(pages, 8640), dtype=np.uint8)
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    k, gamma = sm.rng_bf16(rng, (T, 128), -6, 5), sm.rng_bf16(rng, (128,), -1, 1)
    host, dev = both(lambda *a: d.indexer_k_store(*a, page_tokens=P, ratio=2, eps=1e-6), gpu, k, gamma, pos, slots,
                     cs, cache)
    assert_bits(dev, host, "indexer_k_store cache")


@pytest.mark.parametrize("ratio,K", [(1, 512), (2, 64)])
def test_indexer_topk(gpu, rng, ratio, K):
    """The kernel's selection equals the library's rule applied to the kernel's own logits (the
    fp32 sums may differ from the host's in order; tests/indexer checks them against the header's
    bound, which needs each logit's absolute mass)."""
    from test_indexer import score_case, select_model

    cache, q8, w, pos, row_req, table, valid = score_case(rng, T=24, pages=40, reqs=4, max_pos=2400, ratio=ratio)
    T, max_keys = len(pos), 2400 // ratio + 1
    N = -(-max_keys // 4) * 4
    t = [gpu.put(a) for a in (q8, w, pos, row_req, table, cache)]
    kw = dict(ratio=ratio, page_tokens=64, max_keys=max_keys, row_valid=gpu.put(valid))
    logits = gpu.get(d.indexer_logits(*t, gpu.put(np.zeros((T, N), np.float32)), **kw))
    host = d.indexer_logits(q8, w, pos, row_req, table, cache, np.zeros((T, N), np.float32), ratio=ratio,
                            page_tokens=64, max_keys=max_keys, row_valid=valid)
    fin = np.isfinite(host)
    assert np.array_equal(fin, np.isfinite(logits)), "finite logits differ in place from the reference's"
    got = gpu.get(d.indexer_topk(*t, gpu.put(np.zeros((T, K), np.int32)), **kw))
    for r in range(T):
        n = (pos[r] + 1) // ratio if valid[r] else 0
        assert np.array_equal(got[r], select_model(logits[r], n, K)), f"row {r}"


def test_runs_on_torch_current_stream(gpu, rng):
    """A call made under `with torch.cuda.stream(s)` is ordered on s (checked by an event wait)."""
    from test_kvcache import _insert_case

    cache, k, slots, P = _insert_case(rng, T=2000, P=64, pages=40)
    want = HOST.get(d.kv_insert(HOST.put(k), HOST.put(slots), HOST.put(cache), page_tokens=P))
    s = torch.cuda.Stream()
    kg, sg, cg = gpu.put(k), gpu.put(slots), gpu.put(cache)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        d.kv_insert(kg, sg, cg, page_tokens=P)
        done = torch.cuda.Event()
        done.record(s)
    done.synchronize()
    assert_bits(gpu.get(cg), want, "kv_insert on a side stream")


def test_workspace_sizes(gpu, rng):
    from test_attention import decode_case, run_decode

    c = decode_case(rng, T=8, H=64)
    plan = d.sparse_mla_decode_plan(gpu.put(c["q"]), gpu.put(c["cs"]), gpu.put(c["mi"]), gpu.put(c["ml"]),
                                    main_page_tokens=c["P_s"], extra_cache=gpu.put(c["cc"]),
                                    extra_ids=gpu.put(c["ei"]), extra_lens=gpu.put(c["el"]),
                                    extra_page_tokens=c["P_c"], num_splits=4)
    need = plan["workspace_bytes"]
    assert need == 8 * 4 * 64 * 515 * 4  # the partials (514 words per row) + a flag word
    small = torch.empty(need - 1, dtype=torch.uint8, device="cuda")
    with pytest.raises(d.Dsv4Error, match="WORKSPACE_TOO_SMALL"):
        run_decode(gpu, c, num_splits=4, workspace=small)
    ws = torch.empty(need, dtype=torch.uint8, device="cuda")
    a = gpu.get(run_decode(gpu, c, num_splits=4, workspace=ws))
    b = gpu.get(run_decode(gpu, c, num_splits=4))
    assert_bits(a, b, "caller workspace vs allocated workspace")


def test_device_mismatch_is_refused(gpu):
    cache = np.zeros((2, sm.page_stride(64)), np.uint8)
    with pytest.raises(ValueError, match="one device"):
        d.kv_gather(gpu.put(cache), np.ones(1, np.int32), np.ones((1, 1), np.int32), np.zeros((1, 4, 512), np.uint16),
                    page_tokens=64)
    with pytest.raises(ValueError, match="one device"):
        d.kv_gather(torch.from_numpy(cache), gpu.put(np.ones(1, np.int32)), np.ones((1, 1), np.int32),
                    np.zeros((1, 4, 512), np.uint16), page_tokens=64)


# ---- CUDA graphs -----------------------------------------------------------------------------
def _capture(fn):
    """Warm up on a side stream, then capture fn() into a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def test_graph_kv_gather_replays_with_new_inputs(gpu, rng):
    P, reqs, width = 64, 4, 32
    pages = reqs * width + 1
    cache = gpu.put(sm.random_cache(rng, pages, P))
    table = gpu.put(np.zeros((reqs, width), np.int32))
    seq = gpu.put(np.zeros(reqs, np.int32))
    out = gpu.put(np.zeros((reqs, width * P, 512), np.uint16))
    g = _capture(lambda: d.kv_gather(cache, seq, table, out, page_tokens=P))
    for round_ in range(2):  # new cache bytes, tables and lengths; same shapes
        new_cache = sm.random_cache(rng, pages, P)
        new_table = (1 + rng.permutation(pages - 1)[:reqs * width]).reshape(reqs, width).astype(np.int32)
        new_seq = rng.integers(1, width * P, reqs).astype(np.int32)
        poison = rng.integers(0, 65536, size=(reqs, width * P, 512)).astype(np.uint16)
        for dst, src in ((cache, new_cache), (table, new_table), (seq, new_seq), (out, poison)):
            dst.copy_(gpu.put(src))
        g.replay()
        torch.cuda.synchronize()
        want = d.kv_gather(new_cache, new_seq, new_table, poison.copy(), page_tokens=P)
        assert_bits(gpu.get(out), want, f"graph replay {round_} of kv_gather")


def test_graph_combine_replays_with_new_inputs(gpu, rng):
    c0 = combine_case(rng, T_target=1536, ratio=4, topk_w=512)
    kw = dict(topk=512, window=128, ratio=4, slab_rows=c0["M"], swa_row0=c0["N"])
    st = {k: gpu.put(c0[k]) for k in ("topk", "qsl", "seq", "gat")}
    res = {}

    def call():
        res["c"], res["l"] = d.combine_topk_swa(st["topk"], st["qsl"], st["seq"], st["gat"], **kw)
    g = _capture(call)
    for round_ in range(2):
        c1 = combine_case(rng, T_target=1536, ratio=4, topk_w=512)  # same T and R, new values; the
        # descriptor (slab_rows, swa_row0) stays the captured one, which the reference call reuses
        for k in st:
            st[k].copy_(gpu.put(c1[k]))
        g.replay()
        torch.cuda.synchronize()
        want = d.combine_topk_swa(c1["topk"], c1["qsl"], c1["seq"], c1["gat"], **kw)
        assert_bits(gpu.get(res["c"]), want[0], f"graph replay {round_} of combine (combined)")
        assert_bits(gpu.get(res["l"]), want[1], f"graph replay {round_} of combine (lens)")


def test_graph_decode_with_workspace_allocated_in_capture(gpu, rng):
    """The split-KV workspace is allocated by the binding inside the capture (graph pool)."""
    from test_attention import decode_case, run_decode

    c = decode_case(rng, T=8, H=64)
    st = {k: gpu.put(c[k]) for k in ("q", "cs", "cc", "mi", "ml", "ei", "el", "sink")}
    res = {}

    def call():
        res["out"] = d.sparse_mla_decode(st["q"], st["cs"], st["mi"], st["ml"], main_page_tokens=c["P_s"],
                                         extra_cache=st["cc"], extra_ids=st["ei"], extra_lens=st["el"],
                                         extra_page_tokens=c["P_c"], sink=st["sink"], num_splits=4)
    g = _capture(call)
    c2 = decode_case(rng, T=8, H=64)
    for k in st:
        st[k].copy_(gpu.put(c2[k]))
    g.replay()
    torch.cuda.synchronize()
    want = gpu.get(run_decode(gpu, c2, num_splits=4))
    assert_bits(gpu.get(res["out"]), want, "graph replay of split-KV decode vs a direct call")
