"""vLLM plugin: DeepSeek-V4.1 on Ampere (SM80/SM86) with libdsv4, without editing vLLM.

Installed as the `vllm.general_plugins` entry point `deepinfer_sm80`, which vLLM calls in every
process (API server, engine core, workers). `register()` is cheap and idempotent: it checks the
vLLM version and the signatures of everything it hooks, then rebinds one module global, the
DeepSeek-V4.1 attention-class selector. It touches no GPU. The selector decides per worker, at
model construction (CUDA is initialized by then): on a CUDA device of compute capability 8.x it
installs the worker hooks once and returns `DeepInferV41Attention`; anywhere else it returns
vLLM's own class.

Switches (environment):
  DEEPINFER_DISABLE=1           register() does nothing (vLLM's VLLM_PLUGINS can also exclude it)
  DEEPINFER_FORCE_SM8X=1        take the libdsv4 path on other NVIDIA GPUs too (for testing)
  DEEPINFER_DISABLE_OPS=a,b     keep vLLM's code for optional replacements: mhc, engram, compress

What the SM8x path replaces (vLLM 0.33.0 name -> libdsv4 op, mechanism):
  FlashMLA sparse decode + compute_global_topk_indices_and_lens -> sparse_mla_decode + topk_translate
  dequantize_and_gather_k_cache + combine_topk_swa_indices + FlashMLA sparse prefill
      -> kv_gather + combine_topk_swa + sparse_mla_prefill              (attention subclass)
  fused_inv_rope_fp8_quant in _o_proj -> inv_rope + torch.bmm           (attention subclass)
  indexer query prep / key store -> indexer_q / indexer_k_store          (indexer subclass)
  indexer scoring (DeepGEMM logits, K gather, top-k, V4.1 candidate blocks)
      -> indexer_topk (rows from the SWA metadata, paged keys)            (scoring op class)
  compressor fused_save_compress_norm / rope_quant_insert -> compress / kv_rope_insert
                                                                          (compressor class swap)
  _engram_lookup_kernel -> engram_lookup                                  (vLLM's kernel registry)
  DeepGEMM get_paged_mqa_logits_metadata -> a stub                        (module attribute)
  mhc_pre_delayed_tilelang, mhc_shifted_post_pre, mhc_post_tilelang, hc_collapse_triton
      -> mhc_pre, mhc_seam, mhc_post, mhc_collapse                        (module globals)
"""
import logging
import os

from . import _snapshot

log = logging.getLogger("deepinfer_sm80.vllm")

_state = {"registered": False, "hooks": False, "problem": None, "original": None, "replacements": []}

OPTIONAL_OPS = ("mhc", "engram", "compress")


def disabled_ops():
    """The optional replacements turned off by DEEPINFER_DISABLE_OPS (unknown names raise)."""
    raw = os.environ.get("DEEPINFER_DISABLE_OPS", "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    unknown = names - set(OPTIONAL_OPS)
    if unknown:
        raise ValueError(f"DEEPINFER_DISABLE_OPS: unknown {sorted(unknown)}; known: {', '.join(OPTIONAL_OPS)}")
    return names


def _forced():
    return os.environ.get("DEEPINFER_FORCE_SM8X") == "1"


def register():
    """The entry point: check vLLM, rebind the attention-class selector. Idempotent."""
    if _state["registered"] or os.environ.get("DEEPINFER_DISABLE") == "1":
        return
    _state["registered"] = True
    import vllm

    version = getattr(vllm, "__version__", "unknown")
    problem = _snapshot.version_problem(version)
    if problem is None:
        lines = _snapshot.drift()
        if lines:
            problem = f"vLLM {version} differs from what deepinfer_sm80 was built against: " + "; ".join(lines)
    _state["problem"] = problem
    try:
        model_mod = _snapshot.resolve(_snapshot.M_MODEL)
        original = model_mod._select_dsv4_attn_cls
    except Exception as e:
        log.error("deepinfer_sm80: nothing hooked, the DeepSeek-V4.1 attention selector is missing (%s)%s", e,
                  f"; {problem}" if problem else "")
        return
    if problem:
        # One line now; on SM8x the selector raises the same sentence instead of half-patching.
        log.error("deepinfer_sm80: %s", problem)
    _state["original"] = original
    model_mod._select_dsv4_attn_cls = _make_selector(original)
    log.info("deepinfer_sm80: vLLM %s, rebound %s._select_dsv4_attn_cls (SM8x decides per worker)", version,
             _snapshot.M_MODEL)


def _is_sm8x():
    from vllm.platforms import current_platform

    if not current_platform.is_cuda():
        return False, None
    cap = current_platform.get_device_capability()
    if cap is None:
        return False, None
    return cap.major == 8 or _forced(), cap


def _make_selector(original):
    def select(vllm_config):
        ours, cap = _is_sm8x()
        if not ours:
            return original(vllm_config)
        if _state["problem"]:
            raise RuntimeError(f"deepinfer_sm80: {_state['problem']}")
        _check_config(vllm_config)
        install_worker_hooks(cap)
        from .attention import DeepInferV41Attention

        return DeepInferV41Attention

    select.__wrapped__ = original
    select.__name__ = "_select_dsv4_attn_cls"
    select.__qualname__ = "_select_dsv4_attn_cls"
    select.__doc__ = "deepinfer_sm80: libdsv4 attention on SM8x, else vLLM's choice."
    return select


def _check_config(vllm_config):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum as B

    if vllm_config.parallel_config.prefill_context_parallel_size > 1:
        raise NotImplementedError("deepinfer_sm80: prefill context parallelism is not supported on SM8x")
    backend = vllm_config.attention_config.backend
    if backend not in (None, B.FLASHMLA_SPARSE, B.FLASHMLA_SPARSE_DSV4, B.FLASHMLA_SPARSE_DSV41):
        raise ValueError(f"deepinfer_sm80: attention backend {backend.name} has no SM8x path; leave it unset")


def install_worker_hooks(capability=None):
    """The worker-side replacements, once per process: the DeepGEMM metadata stub, the Engram
    kernel override and the mHC globals. Needs no GPU. Logs one line naming each replacement."""
    if _state["hooks"]:
        return list(_state["replacements"])
    _state["hooks"] = True
    from . import hooks

    off = disabled_ops()
    done = hooks.install(off)
    done += ["attention: DeepInferV41Attention (sparse_mla_decode, topk_translate, kv_gather, combine_topk_swa, "
             "sparse_mla_prefill, inv_rope)", "indexer: DeepInferIndexer (indexer_q, indexer_k_store, indexer_topk with candidate blocks)"]
    if "compress" not in off:
        done.append("compressor: DeepInferCompressor (compress, kv_rope_insert)")
    else:
        done.append("compressor: DeepInferCompressor (kv_rope_insert)")
    _state["replacements"] = done
    import vllm

    cap = f"{capability.major}.{capability.minor}" if capability is not None else "unknown"
    log.info("deepinfer_sm80: vLLM %s, compute capability %s%s; replacements: %s", vllm.__version__, cap,
             " (forced)" if _forced() else "", "; ".join(done))
    return list(done)


def replacements():
    """What install_worker_hooks() put in place (empty before it ran)."""
    return list(_state["replacements"])
