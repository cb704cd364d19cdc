"""Entry point, registration and its effects under vLLM's own loader, on a machine without a GPU."""
import logging
import types

import pytest
import torch
from conftest import mode

pytestmark = mode("default")

import deepinfer_sm80.vllm as plugin  # noqa: E402
from deepinfer_sm80.vllm import _snapshot as S  # noqa: E402

MODEL = S.resolve(S.M_MODEL)
ORIGINAL = MODEL._select_dsv4_attn_cls
# Every global the plugin may rebind, as vLLM ships it (captured before any test registers).
SHIPPED = [(S.resolve(S.M_INDEXER_META), "get_paged_mqa_logits_metadata"), (S.resolve(S.M_ENGRAM), "_engram_lookup_kernel")]
SHIPPED += [(S.resolve(m), n) for m, names in ((S.M_MODEL, ("mhc_pre_delayed_tilelang", "mhc_shifted_post_pre",
                                                            "mhc_post_tilelang", "hc_collapse_triton")),
                                               (S.M_DSPARK, ("mhc_post_tilelang", "hc_collapse_triton")))
            for n in names]
SHIPPED = [(mod, n, getattr(mod, n)) for mod, n in SHIPPED]


@pytest.fixture
def fresh(monkeypatch):
    """The plugin as in a new process: nothing registered, vLLM's globals as shipped."""
    saved = dict(plugin._state)
    from vllm.triton_utils import dispatcher

    monkeypatch.setattr(MODEL, "_select_dsv4_attn_cls", ORIGINAL)
    for mod, n, value in SHIPPED:
        monkeypatch.setattr(mod, n, value)
    monkeypatch.setattr(dispatcher, "_registry", {})
    plugin._state.update(registered=False, hooks=False, problem=None, original=None, replacements=[])
    for var in ("DEEPINFER_DISABLE", "DEEPINFER_FORCE_SM8X", "DEEPINFER_DISABLE_OPS"):
        monkeypatch.delenv(var, raising=False)
    yield
    plugin._state.clear()
    plugin._state.update(saved)


def _config(backend=None, pcp=1):
    return types.SimpleNamespace(parallel_config=types.SimpleNamespace(prefill_context_parallel_size=pcp),
                                 attention_config=types.SimpleNamespace(backend=backend))


def _platform(monkeypatch, major, minor=0, cuda=True):
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability

    monkeypatch.setattr(type(current_platform), "is_cuda", lambda self: cuda)
    monkeypatch.setattr(type(current_platform), "get_device_capability",
                        lambda self, device_id=0: DeviceCapability(major, minor))


def test_entry_point_discovered():
    from importlib.metadata import entry_points

    eps = {ep.name: ep for ep in entry_points(group="vllm.general_plugins")}
    assert "deepinfer_sm80" in eps, sorted(eps)
    assert eps["deepinfer_sm80"].value == "deepinfer_sm80.vllm:register"
    assert eps["deepinfer_sm80"].load() is plugin.register


def test_load_general_plugins_registers_without_cuda(fresh, monkeypatch):
    import vllm.plugins

    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    vllm.plugins.load_general_plugins()
    select = MODEL._select_dsv4_attn_cls
    assert select is not ORIGINAL and select.__wrapped__ is ORIGINAL
    assert not torch.cuda.is_initialized()
    assert plugin._state["problem"] is None, plugin._state["problem"]


def test_register_is_idempotent(fresh):
    plugin.register()
    first = MODEL._select_dsv4_attn_cls
    plugin.register()
    plugin.register()
    assert MODEL._select_dsv4_attn_cls is first
    assert first.__wrapped__ is ORIGINAL  # not a wrapper of a wrapper


def test_disable_leaves_vllm_untouched(fresh, monkeypatch):
    monkeypatch.setenv("DEEPINFER_DISABLE", "1")
    meta = S.resolve(S.M_INDEXER_META)
    before = (MODEL._select_dsv4_attn_cls, meta.get_paged_mqa_logits_metadata, MODEL.mhc_post_tilelang)
    plugin.register()
    assert (MODEL._select_dsv4_attn_cls, meta.get_paged_mqa_logits_metadata, MODEL.mhc_post_tilelang) == before
    assert not plugin._state["registered"]


def test_selector_keeps_vllm_off_sm8x(fresh, monkeypatch):
    calls = []
    select = plugin._make_selector(lambda cfg: calls.append(cfg) or "vllm's class")
    cfg = _config()
    for major in (9, 10, 12, 7):
        _platform(monkeypatch, major)
        assert select(cfg) == "vllm's class"
    _platform(monkeypatch, 8, cuda=False)  # a CPU or ROCm platform
    assert select(cfg) == "vllm's class"
    assert len(calls) == 5 and not plugin._state["hooks"]


def test_selector_takes_sm8x_and_forced(fresh, monkeypatch, caplog):
    from deepinfer_sm80.vllm.attention import DeepInferV41Attention

    select = plugin._make_selector(lambda cfg: pytest.fail("vLLM's selector called on SM8x"))
    _platform(monkeypatch, 8, 6)
    with caplog.at_level(logging.INFO, logger="deepinfer_sm80.vllm"):
        assert select(_config()) is DeepInferV41Attention
    lines = [r.getMessage() for r in caplog.records if "replacements:" in r.getMessage()]
    assert len(lines) == 1 and "compute capability 8.6" in lines[0]
    for item in ("get_paged_mqa_logits_metadata: stub", "_engram_lookup_kernel: engram_lookup", "mhc_seam",
                 "mhc_pre", "mhc_post", "mhc_collapse", "sparse_mla_decode", "indexer_topk", "kv_rope_insert"):
        assert item in lines[0], item
    _platform(monkeypatch, 9)
    monkeypatch.setenv("DEEPINFER_FORCE_SM8X", "1")
    assert select(_config()) is DeepInferV41Attention


def test_selector_refuses_what_sm8x_cannot_run(fresh, monkeypatch):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum as B

    select = plugin._make_selector(lambda cfg: "vllm's class")
    _platform(monkeypatch, 8)
    with pytest.raises(NotImplementedError, match="context parallelism"):
        select(_config(pcp=2))
    with pytest.raises(ValueError, match="FLASHINFER_MLA_SPARSE_DSV41"):
        select(_config(backend=B.FLASHINFER_MLA_SPARSE_DSV41))


def test_untested_version_one_error_line(fresh, monkeypatch, caplog):
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.34.0")
    with caplog.at_level(logging.INFO, logger="deepinfer_sm80.vllm"):
        plugin.register()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "0.34.0 is not supported" in errors[0].getMessage()
    _platform(monkeypatch, 8)
    with pytest.raises(RuntimeError, match="0.34.0 is not supported"):
        MODEL._select_dsv4_attn_cls(_config())
    assert not plugin._state["hooks"]  # nothing half-installed
    assert MODEL._select_dsv4_attn_cls.__wrapped__ is ORIGINAL  # other GPUs keep vLLM's choice


def test_drift_blocks_sm8x_and_names_the_target(fresh, monkeypatch):
    name = f"{S.M_ATTN}:DeepseekV4Attention.forward_mqa"
    monkeypatch.setitem(S.SIGNATURES, name, S._p("self", "q", "kv", "output"))
    plugin.register()
    assert name in plugin._state["problem"]
    _platform(monkeypatch, 8)
    with pytest.raises(RuntimeError, match="forward_mqa"):
        MODEL._select_dsv4_attn_cls(_config())


def test_worker_hooks_rebind(fresh):
    from vllm.triton_utils import dispatcher

    from deepinfer_sm80.vllm import hooks, mhc

    done = plugin.install_worker_hooks()
    assert plugin.install_worker_hooks() == done  # once per process
    meta = S.resolve(S.M_INDEXER_META)
    assert meta.get_paged_mqa_logits_metadata is hooks.paged_mqa_logits_metadata_stub
    engram = S.resolve(S.M_ENGRAM)
    assert isinstance(engram._engram_lookup_kernel, dispatcher.KernelOverride)
    assert engram._engram_lookup_kernel.func is hooks.engram_lookup_impl
    assert engram._engram_lookup_kernel.arg_names == S.KERNEL_ARGS[f"{S.M_ENGRAM}._engram_lookup_kernel"]
    for module, names in ((S.M_MODEL, mhc.MODEL_GLOBALS), (S.M_DSPARK, mhc.DSPARK_GLOBALS)):
        for n in names:
            assert getattr(S.resolve(module), n) is getattr(mhc, n), (module, n)


def test_disable_ops(fresh, monkeypatch):
    monkeypatch.setenv("DEEPINFER_DISABLE_OPS", "mhc,engram")
    done = plugin.install_worker_hooks()
    assert not any("mhc_" in d for d in done) and not any("engram" in d for d in done)
    assert MODEL.mhc_post_tilelang.__module__.startswith("vllm.")
    monkeypatch.setenv("DEEPINFER_DISABLE_OPS", "flashmla")
    with pytest.raises(ValueError, match="unknown"):
        plugin.disabled_ops()


def test_deepgemm_stub_shape():
    from deepinfer_sm80.vllm.hooks import paged_mqa_logits_metadata_stub

    out = paged_mqa_logits_metadata_stub(torch.ones(5, 1, dtype=torch.int32), 64, 132)
    assert out.shape == (133, 2) and out.dtype == torch.int32 and not out.any()


def test_padded_heads():
    from deepinfer_sm80.vllm.attention import DeepInferV41Attention as A

    assert [A.get_padded_num_q_heads(n) for n in (64, 32, 16, 8, 1, 128, 65)] == [64, 32, 16, 16, 16, 128, 128]
    with pytest.raises(ValueError):
        A.get_padded_num_q_heads(129)


def test_scoring_op_builds_without_warmup(monkeypatch):
    """The indexer's scoring op skips SparseAttnIndexer's constructor: no DeepGEMM check, no fp8
    pack_seq warm-up registered; the profile run reserves its workspace (planned once) and returns
    the buffer untouched; a step without the SWA prefix (built outside the attention) says so."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.forward_context import set_forward_context

    from deepinfer_sm80.vllm import scoring
    from deepinfer_sm80.vllm.attention import DeepInferIndexer, DeepInferSparseAttnIndexer

    assert DeepInferIndexer.attn_cls is DeepInferSparseAttnIndexer
    from vllm.v1.attention.ops import common

    registered, reserved = [], []
    monkeypatch.setattr(type(common._PACK_SEQ_TRITON_KERNEL), "register_warmup",
                        lambda self, **kw: registered.append(kw))
    monkeypatch.setattr(scoring, "workspace", lambda n: reserved.append(n))
    k_cache = types.SimpleNamespace(prefix="model.layers.2.attn.indexer.k_cache", kv_cache=torch.empty(0))
    buf = torch.full((4, 8), -7, dtype=torch.int32)
    with set_current_vllm_config(VllmConfig()):
        op = DeepInferSparseAttnIndexer(k_cache, 128, "ue8m0", 8, 128, 64, 64, buf, skip_k_cache_insert=True,
                                        compress_ratio=2)
        assert not registered and op.swa_prefix is None
        with set_forward_context(None, VllmConfig()):
            assert op(torch.empty(4, 16), torch.empty(4, 32, 128), None, torch.empty(4, 32)) is buf
        assert reserved == [scoring.plan(op, 32)[1]] and reserved[0] > 0
        assert torch.equal(buf, torch.full((4, 8), -7, dtype=torch.int32))
        with set_forward_context({k_cache.prefix: object()}, VllmConfig()):
            with pytest.raises(RuntimeError, match="no SWA metadata"):
                op(torch.empty(4, 16), torch.empty(4, 32, 128), None, torch.empty(4, 32))
        with pytest.raises(NotImplementedError, match="MXFP4"):
            DeepInferSparseAttnIndexer(k_cache, 128, "ue8m0", 8, 128, 64, 64, buf, use_fp4_cache=True)
        cand = DeepInferSparseAttnIndexer(k_cache, 128, "ue8m0", 8, 128, 64, 64, buf, candidate_blocks=buf,
                                          candidate_block_size=16, candidate_write=True)
        with pytest.raises(NotImplementedError, match="blocks of 16"):
            scoring.candidate_mode(cand)


def test_scoring_plan_fits_the_logits_budget(monkeypatch):
    """Rows per call shrink until the planned workspace fits VLLM_SPARSE_INDEXER_MAX_LOGITS_MB."""
    from deepinfer_sm80.planner import Planner
    from deepinfer_sm80.vllm import scoring

    layer = types.SimpleNamespace(candidate_blocks=torch.empty(8192, 2048, dtype=torch.int32), candidate_block_size=8,
                                  candidate_write=True, topk_indices_buffer=torch.empty(8192, 512, dtype=torch.int32),
                                  topk_tokens=512, compress_ratio=1, max_model_len=1 << 20)
    rows, need = scoring.plan(layer, 32)
    assert 1 <= rows < 8192 and need <= 512 << 20
    assert Planner().indexer_topk(2 * rows, 32, 512, ratio=1, max_keys=1 << 20, page_tokens=64, candidate_mode=1,
                                  candidate_count=2048) > 512 << 20
    layer.max_model_len = 4096
    assert scoring.plan(layer, 32)[0] == 8192
