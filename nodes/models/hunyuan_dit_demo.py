"""hunyuan-dit-tiny: a deterministic tiny HunyuanDiT checkpoint in the all-in-one layout ComfyUI's hunyuan_dit_1.2
file has (checkpoints/hunyuan_dit_1.2_tiny.safetensors): the DiT under `model.diffusion_model.`, an SD-style VAE
under `vae.` (sd1-tiny's), the BERT encoder under `text_encoders.hydit_clip.transformer.bert.`, mT5 under
`text_encoders.mt5xl.transformer.` and mT5's SentencePiece model as the byte tensor `text_encoders.mt5xl.spiece_model`.

The BERT encoder's WordPiece vocabulary is not in the file (ComfyUI ships Tencent's; see
nodes/models/hunyuan_dit_text.py): demo-models writes a tiny one of our own, with BERT's special ids, to
configs/hydit_clip_tokenizer/vocab.txt, where the loader looks for the user's copy.

Sizes: the DiT 128 wide (ComfyUI's 16 heads of 8), 4 blocks, v1.2's conditions (no image size, no style); the text
widths 32 where ComfyUI fixes 1024 and 2048 (its recorder gives the file's), the text lengths ComfyUI's (77, 256)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.hunyuan_dit import HunyuanDiTNetwork

SEED = 23
FILE = "checkpoints/hunyuan_dit_1.2_tiny.safetensors"
VOCAB_FILE = "configs/hydit_clip_tokenizer/vocab.txt"
SD1_VAE = "vae/sd1-tiny-vae.safetensors"
DIT_PREFIX = "model.diffusion_model."
BERT_PREFIX = "text_encoders.hydit_clip.transformer.bert."
MT5_PREFIX = "text_encoders.mt5xl.transformer."
SPIECE_KEY = "text_encoders.mt5xl.spiece_model"
TEXT_WIDTH = 32
DIT = {
    "hidden": 128,
    "depth": 4,
    "in_channels": 4,
    "patch": 2,
    "mlp_hidden": 512,
    "text_dim": TEXT_WIDTH,
    "text_dim_t5": TEXT_WIDTH,
    "text_len": 77,
    "text_len_t5": 256,
    "pooled_dim": 1024,
    "out_channels": 8,
    "size_cond": False,
    "style_cond": False,
}
# BERT's special tokens where BERT's vocabularies have them ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103),
# then single characters and a few word pieces: enough for the test prompts, English and Chinese.
_WORDS = (
    "a the of and in on with cat dog red blue green sky tree house photo painting water light ##s ##ing ##ed "
    "猫 狗 红 蓝 天 树 房 子 的 一 只 画 在"
).split()
_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?:;'\"()-_/")


def vocab() -> list[str]:
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = specials + _CHARS + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + _WORDS
    return list(dict.fromkeys(pieces))  # each piece once ("a" is a character and a word)


def _dit(gen: torch.Generator) -> dict[str, torch.Tensor]:
    net = HunyuanDiTNetwork(**DIT)
    with torch.no_grad():
        for p in net.parameters():  # the zero-initialised padding, pooler embedding: random too
            if p.dim() >= 2 and bool((p == 0).all()):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
    randomize_constants(net, gen)
    return {DIT_PREFIX + k: v for k, v in net.state_dict().items()}


def _bert(gen: torch.Generator) -> dict[str, torch.Tensor]:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=len(vocab()),
        hidden_size=TEXT_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        pad_token_id=0,
    )
    model = BertModel(config, add_pooling_layer=False)
    randomize_constants(model, gen)
    return {BERT_PREFIX + k: v for k, v in model.state_dict().items() if not k.endswith("position_ids")}


def _mt5(gen: torch.Generator, proto: bytes) -> dict[str, torch.Tensor]:
    import sentencepiece
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=len(sentencepiece.SentencePieceProcessor(model_proto=proto)),
        d_model=TEXT_WIDTH,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        feed_forward_proj="gated-gelu",
        is_encoder_decoder=False,
        use_cache=False,
        tie_word_embeddings=False,
    )
    model = T5EncoderModel(config)
    randomize_constants(model, gen)
    sd = {k: v for k, v in model.state_dict().items() if k != "encoder.embed_tokens.weight"}  # `shared` holds it
    return {MT5_PREFIX + k: v for k, v in sd.items()}


def build_demo_hunyuan_dit(models_dir: Path) -> list[Path]:
    """The tiny all-in-one checkpoint (after sd1-tiny's VAE, whose weights it holds) and the tiny BERT vocabulary."""
    from nodes.models.demo import save_tiny
    from nodes.models.ltx2_demo import spiece_model
    from nodes.output_claims import write_atomic

    models_dir = Path(models_dir)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED)
        proto = spiece_model()
        sd = {**_dit(gen), **_bert(gen), **_mt5(gen, proto)}
    sd.update({"vae." + k: v for k, v in load_file(str(models_dir / SD1_VAE)).items()})
    sd[SPIECE_KEY] = torch.frombuffer(bytearray(proto), dtype=torch.uint8)
    vocab_path = models_dir / VOCAB_FILE
    vocab_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(vocab_path, lambda tmp: Path(tmp).write_text("\n".join(vocab()) + "\n", encoding="utf-8"))
    return [save_tiny(sd, models_dir / FILE), vocab_path]
