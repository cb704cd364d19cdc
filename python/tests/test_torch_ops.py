"""The torch custom ops (deepinfer_sm80.ops, namespace dsv4) and their workspace Planner.

On CPU tensors (the C references): torch.library.opcheck for every op on small model-shaped
inputs, the op's outputs bit for bit equal to the plain binding function's on the same inputs,
and torch.compile tracing an op through its fake implementation. The Planner's sizes against
the library's dsv4_<op>_workspace_size for the planned shapes. On a GPU: ops captured into a
CUDA graph with the Planner's workspace, replayed with new inputs. Skipped without torch.
"""
import numpy as np
import pytest

import deepinfer_sm80 as d
import oracle
import spec_model as sm
from conftest import Backend, torch

pytestmark = pytest.mark.skipif(torch is None, reason="needs torch")

if torch is not None:
    import deepinfer_sm80.ops as ops
    from deepinfer_sm80._ops import op, struct

CPU = Backend("torch")
I32 = np.int32
H_MHC = 512  # hidden size: a multiple of 128 as the model's 4096 / 5120, small for the references
T_MHC = 3

# opcheck's default checks all apply to these ops: test_schema (mutations match the schema's
# declarations: it fails on an undeclared write), test_autograd_registration (no input requires
# grad, and the custom_op registration covers autograd), test_faketensor (the fake
# implementation) and test_aot_dispatch_dynamic (tracing with dynamic shapes, which handles
# mutated arguments through functionalization).
TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


# ---- cases: (op name, positional args, keyword args) with CPU tensors; outputs poisoned --------
def _poison(rng, shape, dtype):
    return CPU.put(oracle.poison(rng, shape, dtype))


def case_kv_insert(rng):
    from test_kvcache import _insert_case

    cache, k, slots, P = _insert_case(rng, T=24, P=64, pages=2)
    return (CPU.put(k), CPU.put(slots), CPU.put(cache)), dict(page_tokens=P)


def case_kv_rope_insert(rng):
    from test_kvcache import _insert_case

    cache, x, slots, P = _insert_case(rng, T=24, P=64, pages=2)
    pos = np.arange(len(slots), dtype=np.int64)
    args = tuple(CPU.put(a) for a in (x, pos, slots, sm.rope_table(rng, 64), cache))
    return args, dict(page_tokens=P, ratio=2)


def case_kv_swa_write(rng):
    P, pages, N, n_ins, max_pos = 32, 2, 6, 5, 64
    cache = rng.integers(0, 256, size=(pages, sm.page_stride(P)), dtype=np.uint8)
    q, kv = sm.rng_bf16(rng, (N, 16, 512), -6, 3), sm.rng_bf16(rng, (N, 512), -6, 3)
    pos = rng.integers(0, max_pos, N).astype(np.int64)
    slots = rng.permutation(pages * P)[:n_ins].astype(np.int64)
    args = tuple(CPU.put(a) for a in (q, kv, pos, slots, sm.rope_table(rng, max_pos), cache))
    return args, dict(page_tokens=P, eps=1e-6, num_heads=12)


def case_kv_gather(rng):
    P, reqs, width = 64, 2, 2
    pages = reqs * width + 1
    table = (1 + rng.permutation(pages - 1)).reshape(reqs, width).astype(I32)
    seq = rng.integers(1, width * P, reqs).astype(I32)
    glen = np.minimum(seq, 70).astype(I32)
    out = _poison(rng, (reqs, width * P + 4, 512), np.uint16)
    args = (CPU.put(sm.random_cache(rng, pages, P)), CPU.put(seq), CPU.put(table), out, CPU.put(glen))
    return args, dict(page_tokens=P, offset=2, max_gather_len=int(seq.max()))


def _translate_inputs(rng):
    from test_indices import _translate_case

    topk, t2r, table, valid, P = _translate_case(rng, T=8, K=64, R=2, width=4, P=64)
    return tuple(CPU.put(a) for a in (topk, t2r, table, valid)), P


def case_topk_translate(rng):
    inputs, P = _translate_inputs(rng)
    T, K = inputs[0].shape
    return inputs + (_poison(rng, (T, K), I32), _poison(rng, (T,), I32)), dict(page_tokens=P)


def case_topk_translate_packed(rng):
    inputs, P = _translate_inputs(rng)
    T, K = inputs[0].shape
    plan = ops.Planner()
    plan.topk_translate_packed(T, K, num_reqs=inputs[2].shape[0], block_table_width=inputs[2].shape[1],
                               page_tokens=P)
    outs = (_poison(rng, (T,), I32), _poison(rng, (T + 1,), I32), _poison(rng, (T * K,), I32), plan.workspace("cpu"))
    return inputs + outs, dict(page_tokens=P)


def case_combine_topk_swa(rng):
    W, R, ratio, topk = 128, 2, 4, 512
    qlen, prefix = rng.integers(1, 6, R), rng.integers(0, 600, R)
    seq, gat = (qlen + prefix).astype(I32), (qlen + np.minimum(prefix, W - 1)).astype(I32)
    qsl = np.concatenate([[0], np.cumsum(qlen)]).astype(I32)
    T, N = int(qlen.sum()), int(seq.max()) // ratio
    tk = rng.integers(-2, N + 5, size=(T, topk)).astype(I32)
    C = d.combine_cols(topk, W)
    args = (CPU.put(tk), CPU.put(qsl), CPU.put(seq), CPU.put(gat), _poison(rng, (T, C), I32), _poison(rng, (T,), I32))
    return args, dict(topk=topk, window=W, ratio=ratio, slab_rows=N + W + 64, swa_row0=N, combine_mode=1)


def case_decode_swa_indices(rng):
    T, R, width, W, P = 8, 2, 4, 128, 64
    args = (CPU.put(rng.integers(0, R, T).astype(I32)), CPU.put(rng.integers(0, width * P, T).astype(I32)),
            CPU.put(rng.integers(0, 4, T).astype(np.uint8)), CPU.put(rng.integers(0, 500, (R, width)).astype(I32)),
            _poison(rng, (T, 1, W), I32), _poison(rng, (T,), I32))
    return args, dict(window=W, page_tokens=P)


def case_sparse_mla_decode(rng):
    from test_attention import decode_case

    c = decode_case(rng, T=2, H=16)
    plan = ops.Planner()
    plan.sparse_mla_decode(2, 16, main_width=128, main_page_tokens=c["P_s"], extra_width=512,
                           extra_page_tokens=c["P_c"], sm_count=108)
    args = (CPU.put(c["q"]), CPU.put(c["cs"]), CPU.put(c["mi"]), CPU.put(c["ml"]),
            _poison(rng, (2, 16, 512), np.uint16), plan.workspace("cpu"), CPU.put(c["cc"]), CPU.put(c["ei"]),
            CPU.put(c["el"]), CPU.put(c["sink"]))
    return args, dict(main_page_tokens=c["P_s"], extra_page_tokens=c["P_c"], sm_count=108)


def case_sparse_mla_prefill(rng):
    T, H, rows, C = 3, 16, 96, 128
    ids = rng.integers(-2, rows + 4, (T, C)).astype(I32)
    args = (CPU.put(sm.rng_bf16(rng, (T, H, 512), -3, 1)), CPU.put(sm.rng_bf16(rng, (rows, 512), -3, 1)),
            CPU.put(ids), CPU.put(rng.integers(0, C, T).astype(I32)), _poison(rng, (T, H, 512), np.uint16),
            CPU.put(rng.normal(0, 2, H).astype(np.float32)))
    return args, {}


def _mhc(rng):
    from test_mhc import seam_inputs

    c = seam_inputs(rng, T_MHC, H_MHC)
    return {k: CPU.put(v) for k, v in c.items()}


def _gate_outs(rng, T=T_MHC):
    return (_poison(rng, (T, 4), np.float32), _poison(rng, (T, 4, 4), np.float32), _poison(rng, (T, 4), np.float32))


def _bf16_out(rng, *shape):
    return _poison(rng, shape, np.uint16)


def _mhc_workspace(name):
    plan = ops.Planner()
    getattr(plan, name)(T_MHC, H_MHC)
    return plan.workspace("cpu")


def case_mhc_post(rng):
    c = _mhc(rng)
    return (c["x"], c["R"], c["post"], c["comb"], _bf16_out(rng, T_MHC, 4, H_MHC),
            _poison(rng, (T_MHC,), np.float32)), {}


def case_mhc_collapse(rng):
    c = _mhc(rng)
    return (c["R"], _bf16_out(rng, T_MHC, H_MHC), c["pre_mix"], c["w"], _bf16_out(rng, T_MHC, H_MHC)), dict(variant=1)


def case_mhc_gates(rng):
    c = _mhc(rng)
    return ((c["R"], c["fn"], c["scale"], c["base"]) + _gate_outs(rng) + (_mhc_workspace("mhc_gates"), None,
                                                                           _poison(rng, (T_MHC, 24), np.float32)), {})


def case_mhc_pre(rng):
    c = _mhc(rng)
    args = (c["R"], c["fn"], c["scale"], c["base"]) + _gate_outs(rng) + (
        _bf16_out(rng, T_MHC, H_MHC), _mhc_workspace("mhc_pre"), c["pre_mix"], c["w"], None,
        _bf16_out(rng, T_MHC, H_MHC), _poison(rng, (T_MHC, 24), np.float32))
    return args, dict(variant=0)


def case_mhc_seam(rng):
    c = _mhc(rng)
    args = (c["x"], c["R"], c["post"], c["comb"], c["fn"], c["scale"], c["base"], _bf16_out(rng, T_MHC, 4, H_MHC)) + \
        _gate_outs(rng) + (_bf16_out(rng, T_MHC, H_MHC), _mhc_workspace("mhc_seam"), c["pre_mix"], c["w"],
                           _bf16_out(rng, T_MHC, H_MHC), _poison(rng, (T_MHC, 24), np.float32))
    return args, dict(variant=0)


def case_mhc_fn_bcast(rng):
    fn, _, _ = sm.mhc_params(rng, H_MHC)
    return (CPU.put(fn), _poison(rng, (24, H_MHC), np.float32)), {}


def case_mhc_fn_split(rng):
    fn, _, _ = sm.mhc_params(rng, H_MHC)
    return (CPU.put(fn), _bf16_out(rng, 48, 4 * H_MHC)), {}


def case_compress(rng):
    from test_compress import _ratio2_rows

    pos, qsl, ring_slot, ring, cap = _ratio2_rows(rng)
    T = len(pos)
    kv, gamma = rng.standard_normal((T, 1024)).astype(np.float32), sm.rng_bf16(rng, (512,), -2, 1)
    args = (CPU.put(kv), CPU.put(gamma), _bf16_out(rng, T, 512), None, CPU.put(pos), CPU.put(ring_slot),
            CPU.put(qsl), CPU.put(ring))
    return args, dict(ratio=2, eps=1e-6, ring_cap=cap)


def case_compress_v4(rng):
    from test_compress import v4_case

    c, P = v4_case(rng, 4)
    names = ("kv_score", "ape", "positions", "state_slot", "req_idx", "block_table", "gamma", "cos_sin_cache",
             "slot_mapping", "state", "cache")
    return tuple(CPU.put(c[k]) for k in names), dict(ratio=4, eps=1e-6, page_tokens=P)


def case_inv_rope(rng):
    T, max_pos = 4, 16
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    return (CPU.put(sm.rng_bf16(rng, (T, 4, 512), -4, 3)), CPU.put(pos), CPU.put(sm.rope_table(rng, max_pos))), {}


def case_engram_lookup(rng):
    T, D, rows = 4, 64, 12
    values = rng.integers(0, 256, size=(rows, D), dtype=np.uint8)
    scales = rng.integers(115, 135, size=(rows, D // 32), dtype=np.uint8)
    ids = rng.integers(-1, rows, size=(T, 2)).astype(np.int32)
    return (CPU.put(values), CPU.put(scales), CPU.put(ids), _bf16_out(rng, T, 2, D)), {}


def case_indexer_q(rng):
    T, H, max_pos = 3, 32, 16
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    return (CPU.put(sm.rng_bf16(rng, (T, H, 128), -6, 6)), CPU.put(sm.rng_bf16(rng, (T, H), -2, 2)), CPU.put(pos),
            CPU.put(sm.rope_table(rng, max_pos)), _poison(rng, (T, H, 128), np.uint8),
            _poison(rng, (T, H), np.float32)), {}


def case_indexer_k_store(rng):
    T, P, pages, max_pos = 12, 64, 2, 32
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    slots = rng.permutation(pages * P)[:T].astype(np.int64)
    cache = rng.integers(0, 256, size=(pages, 8640), dtype=np.uint8)
    args = (CPU.put(sm.rng_bf16(rng, (T, 128), -4, 4)), CPU.put(sm.rng_bf16(rng, (128,), -1, 1)), CPU.put(pos),
            CPU.put(slots), CPU.put(sm.rope_table(rng, max_pos)), CPU.put(cache))
    return args, dict(page_tokens=P, ratio=1, eps=1e-6)


def _score_case(rng):
    from test_indexer import score_case

    cache, q8, w, pos, row_req, table, valid = score_case(rng, T=5, max_pos=300)
    return tuple(CPU.put(a) for a in (q8, w, pos, row_req, table, cache)), CPU.put(valid), 301


def case_indexer_topk(rng):
    args, valid, max_keys = _score_case(rng)
    T = args[0].shape[0]
    ws = ops.Planner()
    ws.indexer_topk(T, 32, 24, ratio=1, max_keys=max_keys, page_tokens=64)
    return args + (_poison(rng, (T, 24), np.int32), ws.workspace("cpu"), valid, None), dict(
        ratio=1, page_tokens=64, max_keys=max_keys)


def case_indexer_logits(rng):
    args, valid, max_keys = _score_case(rng)
    return args + (_poison(rng, (args[0].shape[0], 304), np.float32), valid), dict(
        ratio=1, page_tokens=64, max_keys=max_keys)


# How each op's positional arguments map onto the plain binding function.
PLAIN = {
    "kv_insert": lambda a, kw: d.kv_insert(*a, **kw),
    "kv_swa_write": lambda a, kw: d.kv_swa_write(*a, **kw),
    "kv_rope_insert": lambda a, kw: d.kv_rope_insert(*a, **kw),
    "kv_gather": lambda a, kw: d.kv_gather(*a[:4], gather_lens=a[4], **kw),
    "topk_translate": lambda a, kw: d.topk_translate(*a[:4], global_indices=a[4], lens=a[5], **kw),
    "topk_translate_packed": lambda a, kw: d.topk_translate_packed(*a[:4], lens=a[4], indptr=a[5], packed=a[6],
                                                                   workspace=a[7], **kw),
    "combine_topk_swa": lambda a, kw: d.combine_topk_swa(*a[:4], combined=a[4], combined_lens=a[5],
                                                         **{"mode" if k == "combine_mode" else k: v
                                                            for k, v in kw.items()}),
    "decode_swa_indices": lambda a, kw: d.decode_swa_indices(*a[:4], swa_indices=a[4], swa_lens=a[5], **kw),
    "sparse_mla_decode": lambda a, kw: d.sparse_mla_decode(*a[:4], out=a[4], workspace=a[5], extra_cache=a[6],
                                                           extra_ids=a[7], extra_lens=a[8], sink=a[9], **kw),
    "sparse_mla_prefill": lambda a, kw: d.sparse_mla_prefill(*a[:4], out=a[4], sink=a[5], **kw),
    "mhc_post": lambda a, kw: d.mhc_post(*a[:4], residual_out=a[4], sqrsum=a[5]),
    "mhc_collapse": lambda a, kw: d.mhc_collapse(a[0], a[2], a[3], out=a[1], aux=a[4], **kw),
    "mhc_gates": lambda a, kw: d.mhc_gates(*a[:4], post=a[4], comb=a[5], pre=a[6], workspace=a[7], sqrsum=a[8],
                                           mix=a[9]),
    "mhc_pre": lambda a, kw: d.mhc_pre(*a[:4], post=a[4], comb=a[5], pre=a[6], layer_input=a[7], workspace=a[8],
                                       pre_mix=a[9], norm_weight=a[10], aux=a[12], mix=a[13], **kw),
    "mhc_seam": lambda a, kw: d.mhc_seam(*a[:7], residual_out=a[7], post_out=a[8], comb_out=a[9], pre_out=a[10],
                                         layer_input=a[11], workspace=a[12], pre_mix=a[13], norm_weight=a[14],
                                         aux=a[15], mix=a[16], **kw),
    "mhc_fn_bcast": lambda a, kw: d.mhc_fn_bcast(a[0], out=a[1]),
    "mhc_fn_split": lambda a, kw: d.mhc_fn_split(a[0], out=a[1], **kw),
    "compress": lambda a, kw: d.compress(*a[:3], slot=a[3], positions=a[4], ring_slot=a[5], query_start_loc=a[6],
                                         ring=a[7], **kw),
    "compress_v4": lambda a, kw: d.compress_v4(*a, **kw),
    "inv_rope": lambda a, kw: d.inv_rope(*a, **kw),
    "engram_lookup": lambda a, kw: d.engram_lookup(*a, **kw),
    "indexer_q": lambda a, kw: d.indexer_q(*a, **kw),
    "indexer_k_store": lambda a, kw: d.indexer_k_store(*a, **kw),
    "indexer_topk": lambda a, kw: d.indexer_topk(*a[:7], workspace=a[7], row_valid=a[8], cand=a[9], **kw),
    "indexer_logits": lambda a, kw: d.indexer_logits(*a[:7], row_valid=a[7], **kw),
}
CASES = {name: globals()[f"case_{name}"] for name in PLAIN}


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _bits(t):
    """A tensor's bit pattern (NaN payloads compare equal)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def test_every_public_operator_has_an_op():
    # The package's operators (its public names less the helpers that launch nothing).
    helpers = {"Dsv4Error", "NoDeviceError", "device_count", "device_query", "version", "combine_cols", "gate_params",
               "sparse_mla_decode_plan", "sparse_mla_prefill_plan", "mhc_plan", "plan"}
    assert set(ops.__all__) - {"Planner"} == set(d.__all__) - helpers
    assert set(PLAIN) == set(ops.__all__) - {"Planner"}
    for name in PLAIN:
        assert hasattr(torch.ops.dsv4, name), name


@pytest.mark.parametrize("name", list(PLAIN))
def test_opcheck(rng, name):
    args, kw = CASES[name](rng)
    torch.library.opcheck(getattr(ops, name), args, kw, test_utils=TEST_UTILS)


@pytest.mark.parametrize("name", list(PLAIN))
def test_bit_identical_to_binding(rng, name):
    args, kw = CASES[name](rng)
    mine, plain = _clone(args), _clone(args)
    assert getattr(torch.ops.dsv4, name)(*mine, **kw) is None
    PLAIN[name](plain, kw)
    changed = False
    for i, (a, b, before) in enumerate(zip(mine, plain, args)):
        if isinstance(a, torch.Tensor):  # the workspace too: the host references leave it alone
            assert torch.equal(_bits(a), _bits(b)), f"{name}: argument {i} differs from the binding's"
            changed |= not torch.equal(_bits(a), _bits(before))
    assert changed, f"{name}: the op wrote nothing"


def test_compile_traces_through_the_fake():
    """torch.compile with fullgraph: the op is traced by its fake implementation, then run."""
    rng = np.random.default_rng(7)
    args, kw = case_decode_swa_indices(rng)
    want = _clone(args)
    ops.decode_swa_indices(*want, **kw)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(*a):
        torch.ops.dsv4.decode_swa_indices(*a, **kw)
        return a[5] + 1

    got = _clone(args)
    assert torch.equal(step(*got), want[5] + 1)
    assert torch.equal(got[4], want[4])


# ---- Planner ------------------------------------------------------------------------------------
def _ws(name, **desc):
    return op(name).workspace_size(struct(f"dsv4_{name}_desc_t", **desc))


def test_planner_sizes_equal_the_library():
    p = ops.Planner()
    assert p.workspace_bytes == 0 and p.workspace("cpu").numel() == 0
    p = ops.Planner()
    tokens, H = (1, 8, 64, 300, 2048), 4096
    dense = dict(x_stride=H, residual_stride=4 * H, residual_out_stride=4 * H, layer_input_stride=H, aux_stride=H)
    want_seam = max(_ws("mhc_seam", tokens=T, hidden=H, variant=0, gate=d.gate_params(), norm_eps=1e-20, **dense)
                    for T in tokens)
    assert p.mhc_seam(tokens, H) == want_seam > 0
    want_gates = max(_ws("mhc_gates", tokens=T, hidden=H, broadcast=1, gate=d.gate_params(), residual_stride=H)
                     for T in tokens)
    assert p.mhc_gates(tokens, H, broadcast=True) == want_gates
    want_pre = max(_ws("mhc_pre", tokens=T, hidden=H, variant=1, gate=d.gate_params(1), norm_eps=1e-6,
                       residual_stride=4 * H, layer_input_stride=H, aux_stride=H) for T in tokens)
    assert p.mhc_pre(tokens, H) == want_pre
    want_tt = max(_ws("topk_translate_packed", num_tokens=T, topk=512, num_reqs=8, block_table_width=40,
                      page_tokens=64, topk_stride=512, block_table_stride=40) for T in tokens)
    assert p.topk_translate_packed(tokens, 512, num_reqs=8, block_table_width=40, page_tokens=64) == want_tt > 0
    for mode in (0, 1, 2):  # the op's real geometry (more pages, padded pages, a wider table)
        want_ix = max(_ws("indexer_topk", num_rows=T, num_heads=32, topk=512, ratio=1, num_reqs=4,
                          block_table_width=9000, block_table_stride=9001, page_tokens=128,
                          page_stride_bytes=17280, num_pages=5000, topk_stride=520, max_keys=1 << 20,
                          candidate_mode=mode, candidate_count=2048, candidate_block=8, candidate_stride=2048)
                      for T in tokens)
        q = ops.Planner()
        assert q.indexer_topk(tokens, 32, 512, ratio=1, max_keys=1 << 20, page_tokens=128,
                              candidate_mode=mode) == want_ix > 0
    # decode: the binding's plan on dense tensors of each planned shape, and the op's _workspace_size
    from test_attention import decode_case

    rng = np.random.default_rng(3)
    want_dec = 0
    for T in (1, 8, 64):
        c = decode_case(rng, T=T, H=64)
        dec = dict(main_page_tokens=c["P_s"], extra_cache=CPU.put(c["cc"]), extra_ids=CPU.put(c["ei"]),
                   extra_lens=CPU.put(c["el"]), extra_page_tokens=c["P_c"], sm_count=108)
        plan = d.sparse_mla_decode_plan(CPU.put(c["q"]), CPU.put(c["cs"]), CPU.put(c["mi"]), CPU.put(c["ml"]), **dec)
        ws = _ws("sparse_mla_decode", num_tokens=T, num_heads=64, q_stride_token=64 * 512, q_stride_head=512,
                 out_stride_token=64 * 512, out_stride_head=512, main=struct(
            "dsv4_sparse_mla_list_t", width=128, stride=128, cache=struct("dsv4_sparse_mla_cache_t", page_tokens=c["P_s"],
                                                              page_stride_bytes=c["cs"].shape[1], num_pages=1)),
            has_extra=1, extra=struct("dsv4_sparse_mla_list_t", width=512, stride=512, cache=struct(
                "dsv4_sparse_mla_cache_t", page_tokens=c["P_c"], page_stride_bytes=c["cc"].shape[1], num_pages=1)),
            sm_count=108)
        assert plan["workspace_bytes"] == ws
        want_dec = max(want_dec, ws)
    got = p.sparse_mla_decode((1, 8, 64), 64, main_width=128, main_page_tokens=32, extra_width=512,
                              extra_page_tokens=64, sm_count=108)
    assert got == want_dec > 0
    assert p.sizes == dict(mhc_seam=want_seam, mhc_gates=want_gates, mhc_pre=want_pre,
                           topk_translate_packed=want_tt, sparse_mla_decode=want_dec)
    ws = p.workspace("cpu")
    assert ws.dtype == torch.uint8 and ws.numel() == p.workspace_bytes == max(p.sizes.values())
    assert p.workspace("cpu") is ws, "the workspace is allocated once per device"
    p.mhc_seam(1, H)  # a smaller plan after allocation is fine
    with pytest.raises(RuntimeError, match="plan every shape"):
        p.mhc_seam(1 << 16, H)


def test_planner_reports_library_errors():
    with pytest.raises(d.Dsv4Error):
        ops.Planner().mhc_seam(4, 100)  # hidden not a multiple of 128


# ---- CUDA graph ---------------------------------------------------------------------------------
@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with a CUDA device")
def test_cuda_graph_with_planner_workspace(rng):
    """decode (split-KV: workspace), mhc_seam (workspace) and decode_swa_indices captured into one
    graph with the Planner's workspace, replayed with new inputs, equal to direct calls."""
    from test_attention import decode_case
    from test_mhc import seam_inputs

    gpu = Backend("cuda", device="cuda")
    T, H, Hm = 8, 64, 5120
    plan = ops.Planner()
    plan.sparse_mla_decode(T, H, main_width=128, main_page_tokens=32, extra_width=512, extra_page_tokens=64,
                           num_splits=4)
    plan.mhc_seam(T, Hm)
    ws = plan.workspace("cuda")
    c, m = decode_case(rng, T=T, H=H), seam_inputs(rng, T, Hm)
    st = {k: gpu.put(c[k]) for k in ("q", "cs", "cc", "mi", "ml", "ei", "el", "sink")}
    mt = {k: gpu.put(m[k]) for k in m}
    sw = dict(t2r=gpu.put(np.zeros(T, I32)), pos=gpu.put(np.zeros(T, I32)), valid=gpu.put(np.ones(T, np.uint8)),
              table=gpu.put(np.zeros((2, 8), I32)))
    out = torch.empty(T, H, 512, dtype=torch.bfloat16, device="cuda")
    seam_out = dict(residual_out=torch.empty(T, 4, Hm, dtype=torch.bfloat16, device="cuda"),
                    post_out=torch.empty(T, 4, device="cuda"), comb_out=torch.empty(T, 4, 4, device="cuda"),
                    pre_out=torch.empty(T, 4, device="cuda"),
                    layer_input=torch.empty(T, Hm, dtype=torch.bfloat16, device="cuda"))
    swa = (torch.empty(T, 128, dtype=torch.int32, device="cuda"), torch.empty(T, dtype=torch.int32, device="cuda"))
    dkw = dict(main_page_tokens=32, extra_page_tokens=64, num_splits=4)

    def step():
        torch.ops.dsv4.sparse_mla_decode(st["q"], st["cs"], st["mi"], st["ml"], out, ws, st["cc"], st["ei"], st["el"],
                                         st["sink"], **dkw)
        torch.ops.dsv4.mhc_seam(mt["x"], mt["R"], mt["post"], mt["comb"], mt["fn"], mt["scale"], mt["base"],
                                seam_out["residual_out"], seam_out["post_out"], seam_out["comb_out"],
                                seam_out["pre_out"], seam_out["layer_input"], ws, mt["pre_mix"], mt["w"], None, None)
        torch.ops.dsv4.decode_swa_indices(sw["t2r"], sw["pos"], sw["valid"], sw["table"], *swa, window=128,
                                          page_tokens=64)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for round_ in range(2):
        c, m = decode_case(rng, T=T, H=H), seam_inputs(rng, T, Hm)
        for k in st:
            st[k].copy_(gpu.put(c[k]))
        for k in mt:
            mt[k].copy_(gpu.put(m[k]))
        new_sw = dict(t2r=rng.integers(0, 2, T).astype(I32), pos=rng.integers(0, 8 * 64, T).astype(I32),
                      valid=np.ones(T, np.uint8), table=rng.integers(0, 99, (2, 8)).astype(I32))
        for k in sw:
            sw[k].copy_(gpu.put(new_sw[k]))
        g.replay()
        torch.cuda.synchronize()
        want = d.sparse_mla_decode(st["q"], st["cs"], st["mi"], st["ml"], extra_cache=st["cc"], extra_ids=st["ei"],
                                   extra_lens=st["el"], sink=st["sink"], **dkw)
        assert torch.equal(_bits(out), _bits(want)), f"replay {round_}: decode"
        res = d.mhc_seam(mt["x"], mt["R"], mt["post"], mt["comb"], mt["fn"], mt["scale"], mt["base"],
                         pre_mix=mt["pre_mix"], norm_weight=mt["w"])
        for k, name in (("residual_out", "residual_out"), ("post_out", "post"), ("comb_out", "comb"),
                        ("pre_out", "pre"), ("layer_input", "layer_input")):
            assert torch.equal(_bits(seam_out[k]), _bits(res[name])), f"replay {round_}: mhc_seam {k}"
        w_idx, w_len = d.decode_swa_indices(sw["t2r"], sw["pos"], sw["valid"], sw["table"], window=128,
                                            page_tokens=64)
        assert torch.equal(swa[0], w_idx) and torch.equal(swa[1], w_len), f"replay {round_}: decode_swa_indices"
