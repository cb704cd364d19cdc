"""deepinfer_sm80.layer: one DeepSeek-V4.1 attention block on the library, with YOCO reuse of
the per-step metadata. Needs torch (import it explicitly: `import deepinfer_sm80.layer`).

    from deepinfer_sm80.layer import (ModelConfig, LayerPlan, StepState, AttentionBlock, BlockIO,
                                      synthetic_step, random_caches, random_weights)

config: model constants and layer roles; metadata: the per-step StepMetadata and the caches;
plan: LayerPlan (every buffer, allocated once); yoco: StepState (what a step built, reused);
attend: the decode, prefill-chunk and o-projection compositions as plain functions (shared
with the vLLM plugin); block: AttentionBlock and its stages;
reference: a pure-PyTorch fp32 model of the same block.
"""
from .block import AttentionBlock, BlockIO, Stage, capture_graph
from .config import LayerRole, ModelConfig, sharing_groups
from .metadata import LayerCaches, StepMetadata, random_caches, synthetic_step
from .plan import LayerPlan
from .weights import LayerWeights, random_weights, rope_table
from .yoco import StepState

__all__ = [
    "AttentionBlock", "BlockIO", "Stage", "capture_graph", "LayerRole", "ModelConfig", "sharing_groups",
    "LayerCaches", "StepMetadata", "random_caches", "synthetic_step", "LayerPlan",
    "LayerWeights", "random_weights", "rope_table", "StepState",
]
