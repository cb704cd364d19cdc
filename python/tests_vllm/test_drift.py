"""Drift guards: every name the plugin patches, subclasses or overrides still exists in the
installed vLLM with the parameters (and kernel arguments) of the snapshot it was written against."""
import inspect

import pytest
from conftest import mode

from deepinfer_sm80.vllm import _snapshot as S

pytestmark = mode("default")


def test_version_is_tested():
    import vllm

    assert vllm.__version__ in S.TESTED_VERSIONS
    assert S.version_problem("0.33.0") is None
    assert "not supported" in S.version_problem("0.34.0") and "not supported" in S.version_problem("0.32.1")


@pytest.mark.parametrize("target", sorted(S.SIGNATURES))
def test_signature(target):
    assert S.parameters(S.resolve(target)) == S.SIGNATURES[target]


@pytest.mark.parametrize("name", sorted(S.REPLACED_KERNELS))
def test_kernel_arguments(name):
    assert S._kernel_args(S.resolve(name)) == S.REPLACED_KERNELS[name]


def test_drift_reports_nothing_and_can_fail(monkeypatch):
    assert S.drift() == []
    monkeypatch.setitem(S.SIGNATURES, f"{S.M_ATTN}:DeepseekV4Attention.no_such_method", S._p("self"))
    monkeypatch.setitem(S.REPLACED_KERNELS, f"{S.M_WRITER}._rope_quant_insert_kernel", ("latent",))
    lines = S.drift()
    assert len(lines) == 2 and "no_such_method: missing" in lines[0] and "kernel arguments" in lines[1]


def test_subclassed_names():
    """The classes and attributes the plugin's subclasses rely on."""
    from vllm.models.deepseek_v41 import attention, compressor
    from vllm.models.deepseek_v41.nvidia import flashmla
    from vllm.v1.attention.backends.mla import sparse_swa

    cls = flashmla.DeepseekV4FlashMLAAttention
    assert cls.backend_cls.get_name() == "FLASHMLA_SPARSE_DSV41"
    assert cls.swa_backend_cls is flashmla.DeepseekSparseSWAFlashMLABackend
    assert cls.PREFILL_CHUNK_SIZE == 4
    assert attention.DeepseekV4Indexer.attn_cls.__name__ == "SparseAttnIndexer"
    assert list(inspect.signature(sparse_swa.DeepseekSparseSWAMetadataBuilder.build_tile_scheduler).parameters) == [
        "self", "num_decode_tokens"]
    assert [f for f in ("slot_mapping", "query_start_loc", "token_to_req_indices")
            if f in compressor.CompressorMetadata.__dataclass_fields__] == [
        "slot_mapping", "query_start_loc", "token_to_req_indices"]
    fields = sparse_swa.DeepseekSparseSWAMetadata.__dataclass_fields__
    for f in ("block_table", "block_size", "query_start_loc", "query_start_loc_cpu", "is_valid_token",
              "token_to_req_indices", "decode_swa_indices", "decode_swa_lens", "num_decodes", "num_decode_tokens",
              "num_prefill_tokens", "prefill_seq_lens", "prefill_gather_lens"):
        assert f in fields, f
    assert callable(sparse_swa.DeepseekSparseSWAMetadata.get_prefill_chunk_plan)


def test_scoring_inputs():
    """What the indexer's scoring op reads from vLLM: the SWA metadata's per-token fields, the
    indexer metadata's block table, the forward context's per-step dict, the logits budget, and the
    indexer passing max_model_len // compress_ratio as the scoring op's max_model_len."""
    import dataclasses

    from vllm import envs
    from vllm.forward_context import ForwardContext
    from vllm.models.deepseek_v41 import attention
    from vllm.v1.attention.backends.mla import indexer, sparse_swa

    fields = sparse_swa.DeepseekSparseSWAMetadata.__dataclass_fields__
    for f in ("seq_lens", "query_start_loc", "is_valid_token", "token_to_req_indices"):
        assert f in fields, f
    assert "block_table" in indexer.DeepseekV32IndexerMetadata.__dataclass_fields__
    assert "additional_kwargs" in {f.name for f in dataclasses.fields(ForwardContext)}
    assert isinstance(envs.VLLM_SPARSE_INDEXER_MAX_LOGITS_MB, int)
    src = inspect.getsource(attention.DeepseekV4Indexer.__init__)
    assert "vllm_config.model_config.max_model_len // self.compress_ratio" in src
    assert "candidate_write=candidate_write" in src and "skip_k_cache_insert=True" in src
