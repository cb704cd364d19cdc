"""deepinfer_sm80.layer on a GPU (skipped without one): the model-shaped block (V4.1-Flash at
TP1: hidden 5120, 64 heads, top-512) through layers 0-24 against the fp32 reference, and a
decode step captured in a CUDA graph and replayed with new inputs, equal to eager runs."""
import pytest

from conftest import torch

pytestmark = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with a CUDA device")

if torch is not None:
    from deepinfer_sm80.layer import ModelConfig, StepState, capture_graph
    from layer_case import Chain, run_and_check

# Long enough that top-k selects (n > 512) and that 128 candidate blocks (1,024 columns, the
# model's 2,048 scaled down so the restriction bites at these lengths) exclude columns.
LONG = [(2100, 1), (1500, 6), (0, 64), (1201, 37)]
DECODE = [(3000 + 97 * i, 6) for i in range(4)]


def test_model_shapes_match_reference(rng):
    seed = int(rng.integers(1 << 30))
    print(f"step seed {seed}")
    cfg = ModelConfig(candidate_blocks=128)
    run_and_check(Chain(cfg, [0, 2, 3, 20, 21, 24], LONG, 2, device="cuda", seed=seed))


def _bits(t):
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t


@pytest.mark.parametrize("layer", [20, 21])
def test_decode_step_graph_replays(rng, layer):
    """Layer 20 (compressor, indexer top-k with candidates, metadata builds) or 21 (consumer) of a decode
    step of 4 requests x 6 tokens in one CUDA graph; replays with new inputs equal eager runs."""
    seed = int(rng.integers(1 << 30))
    cfg = ModelConfig()
    chain = Chain(cfg, [20, 21], DECODE, 4, device="cuda", seed=seed)
    if layer == 21:
        chain.run(20)
    stages = chain.blocks[layer].stages(chain.io[layer], chain.meta, chain.state)
    g = capture_graph(stages)
    io = chain.io[layer]
    outs = ("residual_out", "post_out", "comb_out", "pre_out", "layer_input")
    for round_ in range(2):
        io.x.copy_(torch.randn_like(io.x, dtype=torch.float32).to(torch.bfloat16))
        io.residual.copy_(torch.randn_like(io.residual, dtype=torch.float32).to(torch.bfloat16))
        g.replay()
        torch.cuda.synchronize()
        replay = {k: getattr(io, k).clone() for k in outs}
        topk = chain.meta.topk_buffer.clone()
        fresh = StepState(chain.meta, reuse=True)
        if layer == 21:
            chain.blocks[20].stages(chain.io[20], chain.meta, fresh)  # marks the group built
        for st in chain.blocks[layer].stages(io, chain.meta, fresh):
            st.run()
        torch.cuda.synchronize()
        for k in outs:
            assert torch.equal(_bits(replay[k]), _bits(getattr(io, k))), f"round {round_}: {k} differs from eager"
        assert torch.equal(topk, chain.meta.topk_buffer), f"round {round_}: top-k differs from eager"
