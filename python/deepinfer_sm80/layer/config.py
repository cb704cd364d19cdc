"""DeepSeek-V4.1 model constants and layer roles (which caches a layer owns, whose it reads).

V4.1-Flash keeps compress ratio 0 as SWA-only: layers 0-1 attend to their sliding window only,
layers 2-19 to a ratio-2 compressed cache, layers 20-39 to a full-length (ratio-1) one. Only the
kv-source layers (2, 8, 14, 20) own a compressed cache, its indexer key cache and (ratio 2) the
compressor ring; the layers after a source read the source's caches (YOCO, "you only cache
once"). Index sources (2, 8, 14, 20, 24, 28, 32, 36) run the lightning indexer and write the
shared top-k buffer that the following layers reuse. Layer 20 also keeps the best candidate
blocks of 8 compressed entries, to which 24, 28, 32 and 36 restrict their scoring.
"""
from dataclasses import dataclass, replace

HEAD_DIM = 512          # the MLA latent row (448 NoPE + 64 RoPE dims)
INDEX_HEAD_DIM = 128
CANDIDATE_NONE, CANDIDATE_WRITE, CANDIDATE_RESTRICT = 0, 1, 2


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of one V4.1 decoder layer on one rank (defaults: V4.1-Flash at TP1).

    num_heads and o_groups are per rank (64 / 8 at TP1, 32 / 4 at TP2); the other widths
    are the checkpoint's."""
    hidden: int = 5120
    num_heads: int = 64
    q_lora_rank: int = 1280
    o_lora_rank: int = 1024
    o_groups: int = 8
    index_heads: int = 32
    index_topk: int = 512
    window: int = 128
    compress_ratios: tuple = (0, 0) + (2,) * 18 + (1,) * 20
    kv_sources: tuple = (2, 8, 14, 20)
    index_sources: tuple = (2, 8, 14, 20, 24, 28, 32, 36)
    candidate_source: int = 20
    candidate_blocks: int = 2048
    candidate_block_size: int = 8
    rms_norm_eps: float = 1e-20
    swa_page_tokens: int = 32       # SWA pages of V4.1
    block_tokens: int = 128         # compressed / indexer pages hold block_tokens // ratio states (SM8x)
    ring_cap: int = 8               # compressor ring rows per request: max(8, next_pow2(spec + 2))
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0

    @property
    def num_layers(self):
        return len(self.compress_ratios)

    @property
    def heads_per_group(self):
        return self.num_heads // self.o_groups

    def comp_page_tokens(self, ratio):
        """States per compressed (and indexer) page at `ratio` (128 at r = 1, 64 at r = 2)."""
        return self.block_tokens // ratio

    def role(self, layer):
        """The LayerRole of decoder layer `layer` (0-based)."""
        return LayerRole.of(self, layer)

    def small(self, **overrides):
        """A reduced configuration with the same structure, for CPU tests (C references)."""
        base = dict(hidden=512, num_heads=16, q_lora_rank=128, o_lora_rank=64, o_groups=2, index_heads=32,
                    index_topk=16, candidate_blocks=4)
        base.update(overrides)
        return replace(self, **base)


@dataclass(frozen=True)
class LayerRole:
    """What one layer does: its ratio, the layer whose compressed cache it reads (kv_source)
    and whose top-k list it uses (index_source), whether it owns them, its candidate mode."""
    layer: int
    ratio: int
    kv_source: object = None        # int or None (SWA-only)
    index_source: object = None
    candidate_mode: int = CANDIDATE_NONE

    @classmethod
    def of(cls, cfg, layer):
        if not 0 <= layer < cfg.num_layers:
            raise ValueError(f"layer {layer} is outside the model's {cfg.num_layers} layers")
        r = cfg.compress_ratios[layer]
        if r == 0:
            return cls(layer, 0)
        kv = max(s for s in cfg.kv_sources if s <= layer)
        idx = max(s for s in cfg.index_sources if s <= layer)
        cand = CANDIDATE_NONE
        if layer == cfg.candidate_source:
            cand = CANDIDATE_WRITE
        elif layer == idx and kv == cfg.candidate_source:
            cand = CANDIDATE_RESTRICT
        return cls(layer, r, kv, idx, cand)

    @property
    def owns_kv(self):
        """Runs the compressor and writes the compressed and indexer key caches."""
        return self.kv_source == self.layer

    @property
    def owns_indexer(self):
        """Runs the indexer (query prep, scoring, top-k)."""
        return self.index_source == self.layer

    @property
    def kind(self):
        """A short name: swa-only, kv-source, index-source, consumer."""
        if self.ratio == 0:
            return "swa-only"
        if self.owns_kv:
            return "kv-source"
        return "index-source" if self.owns_indexer else "consumer"


def sharing_groups(cfg):
    """[(kv_source, [layers])]: the layers that read each compressed cache (None: SWA-only)."""
    groups = {}
    for layer in range(cfg.num_layers):
        groups.setdefault(cfg.role(layer).kv_source, []).append(layer)
    return list(groups.items())
