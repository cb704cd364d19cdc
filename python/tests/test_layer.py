"""deepinfer_sm80.layer on CPU tensors (the C references): layer roles, a step through a chain
of blocks against the pure-PyTorch fp32 reference, YOCO reuse (build counts, and outputs equal
to rebuilding at every layer). Small shapes (ModelConfig.small)."""
import pytest

from conftest import SEED, torch

pytestmark = pytest.mark.skipif(torch is None, reason="needs torch")

if torch is not None:
    from deepinfer_sm80.layer import ModelConfig, sharing_groups
    from layer_case import MIXED, Chain, run_and_check

CHAIN = [0, 2, 3, 20, 21, 24]


def test_roles_follow_the_v41_table():
    cfg = ModelConfig()
    kinds = {x: cfg.role(x).kind for x in range(40)}
    assert [x for x in range(40) if kinds[x] == "swa-only"] == [0, 1]
    assert [x for x in range(40) if kinds[x] == "kv-source"] == [2, 8, 14, 20]
    assert [x for x in range(40) if kinds[x] == "index-source"] == [24, 28, 32, 36]
    assert cfg.role(7).kv_source == 2 and cfg.role(13).index_source == 8 and cfg.role(19).ratio == 2
    assert cfg.role(39).kv_source == 20 and cfg.role(39).index_source == 36 and cfg.role(39).ratio == 1
    assert [x for x in range(40) if cfg.role(x).candidate_mode == 1] == [20]
    assert [x for x in range(40) if cfg.role(x).candidate_mode == 2] == [24, 28, 32, 36]
    assert [(k, v[0], v[-1]) for k, v in sharing_groups(cfg)] == [(None, 0, 1), (2, 2, 7), (8, 8, 13),
                                                                  (14, 14, 19), (20, 20, 39)]
    with pytest.raises(ValueError):
        cfg.role(40)


def test_chain_matches_reference(rng):
    """Mixed decode (1 and 6 tokens) and prefill (fresh, odd start, long context) in one step."""
    seed = int(rng.integers(1 << 30))
    print(f"step seed {seed}")
    cfg = ModelConfig().small()
    run_and_check(Chain(cfg, CHAIN, MIXED, 2, device="cpu", seed=seed))


def _outputs(chain):
    return {x: (chain.io[x].residual_out.clone(), chain.io[x].layer_input.clone()) for x in chain.layers}


def test_yoco_reuse_equals_rebuilding(rng):
    """Two prefill chunks (6 prefill requests): reused metadata gives the same bits as
    rebuilding at every layer; the compressed gather is redone per chunk and layer."""
    seed = int(rng.integers(1 << 30))
    cfg = ModelConfig().small()
    reqs = MIXED[:2] + [(40 * i + 3, 5 + i) for i in range(6)]
    layers = [0, 1, 2, 3, 20, 21, 24, 25]
    got = {}
    for reuse in (True, False):
        chain = Chain(cfg, layers, reqs, 2, device="cpu", seed=seed, reuse=reuse)
        for x in layers:
            chain.run(x)
        got[reuse] = _outputs(chain), dict(chain.state.builds)
    for x in layers:
        for a, b in zip(got[True][0][x], got[False][0][x]):
            assert torch.equal(a.view(torch.int16), b.view(torch.int16)), f"layer {x}: reuse changed the output"
    assert got[True][1] == dict(swa=1, kv=2, index=4, kv_gather=6 * 2), got[True][1]
    assert got[False][1] == dict(swa=8, kv=6, index=8, kv_gather=6 * 2), got[False][1]


def test_build_counts_of_a_40_layer_step():
    """One build per sharing group: the SWA metadata once, each kv source's once, each
    (kv source, index source) pair's once, the compressed gather once per kv source."""
    cfg = ModelConfig().small()
    chain = Chain(cfg, [0], MIXED, 2, device="cpu", seed=1)
    from deepinfer_sm80.layer import AttentionBlock, StepState, random_caches, random_weights
    state = StepState(chain.meta)
    caches = {x: random_caches(cfg, cfg.role(x), dict(swa_pages=2, comp_pages=2, ring_blocks=5)) for x in range(40)}
    for x in range(40):
        w = random_weights(cfg, cfg.role(x), max_position=2)
        AttentionBlock(cfg, x, w, caches, chain.plan).stages(chain.io[0], chain.meta, state)
    assert dict(state.builds) == dict(swa=1, kv=4, kv_gather=4, index=9), dict(state.builds)
