"""Generators of the transformer model families (random weights, the node patterns of PyTorch's
opset-17 exports: MatMul + Add linears, Reshape/Transpose heads, a transposed K operand,
Softmax, LayerNormalization, GELU as erf or tanh chains). Registered in `benchmarks/models.py`.

Shapes: GPT-2-tiny (4 layers, d 256, 4 heads, 128 tokens, causal mask, tanh GELU, LM head over
8192 tokens), Whisper-tiny's encoder (Conv1d front end on 80 x 3000 mel frames, 4 layers, d 384,
6 heads, 1500 positions), BERT-tiny (google/bert_uncased_L-2_H-128_A-2: 2 layers, d 128, 2 heads,
128 tokens, attention mask, post-LN, pooler) and ViT-tiny (patch 16 on 224 x 224, 12 layers,
d 192, 3 heads, class token).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto

from benchmarks.netbuilder import Net


def _attention(
    n: Net,
    x: str,
    t: int,
    d: int,
    heads: int,
    *,
    fused_qkv: bool = True,
    mask: str | None = None,
    causal: bool = False,
) -> str:
    """Multi-head self-attention on [1, t, d]: q k^T / sqrt(dh) (+ mask) -> softmax -> @ v."""
    dh = d // heads
    if fused_qkv:
        qkv = n.linear(x, d, 3 * d)
        split = n.const("split", np.array([d, d, d], np.int64))
        q, k, v = (f"{qkv}_s{i}" for i in range(3))
        n.nodes.append(onnx.helper.make_node("Split", [qkv, split], [q, k, v], axis=2))
    else:
        q, k, v = (n.linear(x, d, d) for _ in range(3))
    q = n.transpose(n.reshape(q, (1, t, heads, dh)), (0, 2, 1, 3))
    kt = n.transpose(n.reshape(k, (1, t, heads, dh)), (0, 2, 3, 1))
    v = n.transpose(n.reshape(v, (1, t, heads, dh)), (0, 2, 1, 3))
    s = n.op("MatMul", [q, kt], "scores")
    s = n.op("Div", [s, n.scalar("sqrt_dh", math.sqrt(dh))], "scaled")
    if causal:
        keep = n.const("causal", np.tril(np.ones((1, 1, t, t), dtype=bool)))
        s = n.op("Where", [keep, s, n.scalar("neg_big", -3.4028234663852886e38)], "masked")
    if mask is not None:
        s = n.op("Add", [s, mask], "masked")
    p = n.op("Softmax", [s], "softmax", axis=-1)
    o = n.op("MatMul", [p, v], "context")
    o = n.reshape(n.transpose(o, (0, 2, 1, 3)), (1, t, d))
    return n.linear(o, d, d)


def _mlp(n: Net, x: str, d: int, hidden: int, gelu: Callable[[str], str]) -> str:
    return n.linear(gelu(n.linear(x, d, hidden)), hidden, d)


def _pre_ln_block(
    n: Net, x: str, t: int, d: int, heads: int, hidden: int, gelu, eps: float, **attn
) -> str:
    x = n.op("Add", [x, _attention(n, n.layernorm(x, d, eps), t, d, heads, **attn)], "res")
    return n.op("Add", [x, _mlp(n, n.layernorm(x, d, eps), d, hidden, gelu)], "res")


def _embedding(n: Net, ids: str, vocab: int, t: int, d: int) -> str:
    """Token embedding (Gather) + learned positions (a constant once positions are folded)."""
    wte = n.const("wte", (0.02 * n.rng.standard_normal((vocab, d))).astype(np.float32))
    wpe = (0.01 * n.rng.standard_normal((1, t, d))).astype(np.float32)
    tok = n.op("Gather", [wte, ids], "tok_emb", axis=0)
    return n.op("Add", [tok, n.const("wpe", wpe)], "emb")


def build_gpt2_tiny(
    t: int = 128, d: int = 256, heads: int = 4, layers: int = 4, vocab: int = 8192, seed: int = 0
) -> onnx.ModelProto:
    """GPT-2-shaped decoder: pre-LN blocks, fused c_attn + Split, causal Where mask, gelu_new."""
    n = Net("gpt2_tiny", seed)
    x = _embedding(n, "input_ids", vocab, t, d)
    for _ in range(layers):
        x = _pre_ln_block(n, x, t, d, heads, 4 * d, n.gelu_tanh, 1e-5, causal=True)
    x = n.layernorm(x, d)
    n.linear(x, d, vocab, bias=False)
    return n.model_io([("input_ids", TensorProto.INT64, (1, t))], [("logits", (1, t, vocab))])


def build_whisper_encoder_tiny(
    frames: int = 3000, mels: int = 80, d: int = 384, heads: int = 6, layers: int = 4, seed: int = 0
) -> onnx.ModelProto:
    """Whisper-tiny's audio encoder: Conv1d(k3) + GELU, Conv1d(k3, s2) + GELU, positions, pre-LN
    blocks with erf GELU, final LayerNorm."""
    n = Net("whisper_encoder_tiny", seed)
    x = "input_features"
    for cin, stride in ((mels, 1), (d, 2)):
        w = n.const("conv_w", n.weight((d, cin, 3), cin * 3))
        b = n.const("conv_b", np.zeros(d, np.float32))
        x = n.gelu_erf(
            n.op("Conv", [x, w, b], "conv1d", kernel_shape=[3], pads=[1, 1], strides=[stride])
        )
    t = frames // 2
    x = n.transpose(x, (0, 2, 1))
    pos = (0.01 * n.rng.standard_normal((t, d))).astype(np.float32)
    x = n.op("Add", [x, n.const("pos", pos)], "pos")
    for _ in range(layers):
        x = _pre_ln_block(n, x, t, d, heads, 4 * d, n.gelu_erf, 1e-5, fused_qkv=False)
    n.layernorm(x, d)
    return n.model_io(
        [("input_features", TensorProto.FLOAT, (1, mels, frames))],
        [("last_hidden_state", (1, t, d))],
    )


def build_bert_tiny(
    t: int = 128, d: int = 128, heads: int = 2, layers: int = 2, vocab: int = 30522, seed: int = 0
) -> onnx.ModelProto:
    """BERT-tiny: embeddings + LayerNorm, post-LN blocks with an additive attention mask built
    from the int64 mask input, erf GELU, tanh pooler on the first token."""
    n = Net("bert_tiny", seed)
    x = n.layernorm(_embedding(n, "input_ids", vocab, t, d), d, 1e-12)
    m = n.op("Unsqueeze", ["attention_mask", n.const("axes", np.array([1, 2], np.int64))])
    m = n.op("Cast", [m], "mask_f", to=TensorProto.FLOAT)
    m = n.op("Sub", [n.scalar("one", 1.0), m], "mask_inv")
    m = n.op("Mul", [m, n.scalar("neg", -10000.0)], "mask_add")
    for _ in range(layers):
        a = _attention(n, x, t, d, heads, fused_qkv=False, mask=m)
        x = n.layernorm(n.op("Add", [a, x], "res"), d, 1e-12)
        f = _mlp(n, x, d, 4 * d, n.gelu_erf)
        x = n.layernorm(n.op("Add", [f, x], "res"), d, 1e-12)
    hidden = x
    first = n.op("Gather", [x, n.const("idx0", np.array(0, np.int64))], "cls", axis=1)
    w = n.const("pool_w", n.weight((d, d), d))
    b = n.const("pool_b", np.zeros(d, np.float32))
    n.op("Tanh", [n.op("Gemm", [first, w, b], "pooler", transB=1)], "pooled")
    n.nodes[-1].output[0] = "pooler_output"
    # hidden is the second output: rename its producer's output in every consumer.
    _rename(n, hidden, "last_hidden_state")
    return n.model_io(
        [("input_ids", TensorProto.INT64, (1, t)), ("attention_mask", TensorProto.INT64, (1, t))],
        [("pooler_output", (1, d)), ("last_hidden_state", (1, t, d))],
    )


def build_vit_tiny(
    image: int = 224,
    patch: int = 16,
    d: int = 192,
    heads: int = 3,
    layers: int = 12,
    classes: int = 1000,
    seed: int = 0,
) -> onnx.ModelProto:
    """ViT-Tiny/16: patch-embedding conv, class token, positions, pre-LN blocks (eps 1e-6) with
    fused qkv, erf GELU, head on the class token."""
    n = Net("vit_tiny", seed)
    g = image // patch
    t = g * g + 1
    x = n.conv("input", 3, d, patch, patch, 0)
    x = n.transpose(n.reshape(x, (1, d, g * g)), (0, 2, 1))
    cls = n.const("cls", (0.02 * n.rng.standard_normal((1, 1, d))).astype(np.float32))
    x = n.op("Concat", [cls, x], "tokens", axis=1)
    pos = (0.02 * n.rng.standard_normal((1, t, d))).astype(np.float32)
    x = n.op("Add", [x, n.const("pos", pos)], "pos")
    for _ in range(layers):
        x = _pre_ln_block(n, x, t, d, heads, 4 * d, n.gelu_erf, 1e-6)
    x = n.layernorm(x, d, 1e-6)
    x = n.op("Gather", [x, n.const("idx0", np.array(0, np.int64))], "cls_out", axis=1)
    w = n.const("head_w", n.weight((classes, d), d))
    b = n.const("head_b", np.zeros(classes, np.float32))
    n.op("Gemm", [x, w, b], "head", transB=1)
    return n.model("input", "output", (1, 3, image, image), (1, classes))


def _rename(n: Net, old: str, new: str) -> None:
    for node in n.nodes:
        for i, v in enumerate(node.input):
            if v == old:
                node.input[i] = new
        for i, v in enumerate(node.output):
            if v == old:
                node.output[i] = new


TRANSFORMER_BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "gpt2_tiny": build_gpt2_tiny,
    "whisper_encoder_tiny": build_whisper_encoder_tiny,
    "bert_tiny": build_bert_tiny,
    "vit_tiny": build_vit_tiny,
}
