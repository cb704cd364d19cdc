"""deepinfer_sm80.layer on CPU tensors (the C references): layer roles, a step through a chain
of blocks against the pure-PyTorch fp32 reference, YOCO reuse (build counts, and outputs equal
to rebuilding at every layer), the top-k stand-in's selection rule. Small shapes (ModelConfig.small)."""
import pytest

from conftest import SEED, torch

pytestmark = pytest.mark.skipif(torch is None, reason="needs torch")

if torch is not None:
    from deepinfer_sm80.layer import ModelConfig, sharing_groups
    from deepinfer_sm80.layer import indexer_topk as itk
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


def test_selection_rule_known_answers():
    """indexer.md-style cases: ties to the lower index, NaN first, -0.0 = +0.0, short rows."""
    nan, inf = float("nan"), float("inf")
    lg = torch.tensor([[1, 3, 3, nan, -inf, 2, 3, 0], [0.0, -0.0, -1, -0.0, -2, -2, -2, -2]])
    el = torch.tensor([[True] * 8, [True] * 4 + [False] * 4])
    assert itk.select(lg, el, 4).tolist() == [[1, 2, 3, 6], [0, 1, 2, 3]]
    assert itk.select(lg[1:, :4], torch.tensor([[True, True, True, False]]), 4).tolist() == [[0, 1, 2, -1]]
    assert itk.select(lg[1:, :4], el[1:, :4], 2).tolist() == [[0, 1]]
    # Candidate source: C = 2, blocks of 8; n = 20: maxima 5, 7, pinned -> [1, 2]; n = 24 ties -> [0, 2].
    row = torch.full((2, 24), -1.0)
    row[0, 3], row[0, 9], row[0, 17] = 5, 7, 1
    row[1, 3], row[1, 9], row[1, 17] = 5, 5, 9
    assert itk.candidate_blocks(row, torch.tensor([20, 24]), 2, 8).tolist() == [[1, 2], [0, 2]]
    # Consumer: listed blocks {1, 2} and {2, 0} (-1 and 7 ignored) of n = 20.
    cand = torch.tensor([[1, 2, -1, -1], [2, 0, -1, 7]])
    cols = itk.candidate_columns(cand, torch.tensor([20, 20]), 24, 8)
    assert torch.nonzero(cols[0]).flatten().tolist() == list(range(8, 20))
    assert torch.nonzero(cols[1]).flatten().tolist() == list(range(8)) + list(range(16, 20))
    kat = torch.tensor([[9.0] * 8 + [1, 2, 3, 4, 5, 6, 7, 8, 8, 0, -1, nan, -5, -5, -5, -5]] * 2)
    assert itk.select(kat, cols, 4).tolist() == [[14, 15, 16, 19], [0, 1, 2, 19]]
