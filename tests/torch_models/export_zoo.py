"""Exports the model zoo (tests/torch_models/zoo/): one model of each family users bring,
built by torchvision's and transformers' own constructors at small sizes with random weights,
through both PyTorch exporters (TorchScript and dynamo). tests/test_torch_zoo.py compiles each
and compares both executors with onnxruntime; neither it nor anything else in the repo needs
torch, only this script does (see README.md beside it for the venv).

A model whose full file would pass STRIP_ABOVE bytes is committed without its large float
initializers: each keeps its name, dtype and shape, and the model's metadata records the seed
and the statistics (mean, std, min, max) `tests/torch_models/zoo.py` refills it from. The
reference of such a model is onnxruntime on the refilled model, computed by the test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

# PyPI's torchvision wheel is linked against the CUDA build of torch, so its C++ ops library
# does not load next to the CPU build; only its fake-tensor registrations of nms/qnms need the
# ops to exist (no model here calls them). Declaring the two schemas lets torchvision import.
_TV_LIB = torch.library.Library("torchvision", "DEF")
_TV_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_TV_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

import torchvision  # noqa: E402
import transformers  # noqa: E402
from torchvision.models import (  # noqa: E402
    convnext,
    efficientnet,
    segmentation,
    swin_transformer,
    vgg,
)
from torchvision.models.detection import backbone_utils  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo import ZOO_DIR, refill, strip  # noqa: E402

#: A full model larger than this is committed stripped (weights refilled by the test).
STRIP_ABOVE = 256 * 1024
SEED = 20261123
DROPPED_NODE_METADATA = {"pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node"}


class Outputs(nn.Module):
    """Calls a library model with named inputs and returns the named outputs as a tuple (the
    libraries return dicts and ModelOutputs, which the exporters flatten under other names)."""

    def __init__(self, model: nn.Module, inputs: list[str], outputs: list[str] | None) -> None:
        super().__init__()
        self.model, self.inputs, self.outputs = model, inputs, outputs

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...] | torch.Tensor:
        if self.inputs == ["x"]:
            out = self.model(*args)
        else:
            out = self.model(**dict(zip(self.inputs, args, strict=True)))
        if self.outputs is None:
            return out
        return tuple(out[k] for k in self.outputs)


@dataclass
class Family:
    name: str
    make: Callable[[], nn.Module]
    #: input name -> (shape, dtype, high) ; high: exclusive upper bound of integer inputs
    inputs: dict[str, tuple[tuple[int, ...], str, int]]
    #: keys of the library's output dict / ModelOutput (None: the model returns a tensor)
    outputs: list[str] | None = None


def _img(h: int, w: int | None = None) -> dict[str, tuple[tuple[int, ...], str, int]]:
    return {"x": ((1, 3, h, w or h), "float32", 0)}


def _tokens(*names: str, seq: int = 8, vocab: int = 96) -> dict:
    return {n: ((1, seq), "int64", vocab) for n in names}


def _bert() -> nn.Module:
    cfg = transformers.BertConfig(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    return transformers.BertModel(cfg)


def _distilbert() -> nn.Module:
    cfg = transformers.DistilBertConfig(
        vocab_size=96,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    return transformers.DistilBertModel(cfg)


def _gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(
        vocab_size=96,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.GPT2LMHeadModel(cfg)


def _t5() -> nn.Module:
    cfg = transformers.T5Config(
        vocab_size=96,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        use_cache=False,
        attn_implementation="eager",
    )
    return transformers.T5Model(cfg)


def _whisper_encoder() -> nn.Module:
    cfg = transformers.WhisperConfig(
        vocab_size=96,
        num_mel_bins=16,
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=2,
        decoder_layers=1,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        attn_implementation="eager",
    )
    return transformers.WhisperModel(cfg).get_encoder()


def _wav2vec2() -> nn.Module:
    cfg = transformers.Wav2Vec2Config(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 2, 2),
        conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        attn_implementation="eager",
    )
    return transformers.Wav2Vec2Model(cfg)


def _vgg() -> nn.Module:
    # torchvision's VGG hard-codes a 512*7*7 -> 4096 -> 4096 classifier (120 M weights);
    # the features use torchvision's own make_layers, the classifier keeps its structure at a
    # small width (Linear/ReLU/Dropout x2, Linear).
    model = vgg.VGG(vgg.make_layers([8, "M", 16, "M", 32, 32, "M", 32, 32, "M"], True), 10)
    model.avgpool = nn.AdaptiveAvgPool2d((2, 2))
    model.classifier = nn.Sequential(
        nn.Linear(32 * 2 * 2, 64),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(64, 64),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(64, 10),
    )
    return model


def _efficientnet() -> nn.Module:
    setting, last = efficientnet._efficientnet_conf(
        "efficientnet_b0", width_mult=0.5, depth_mult=0.5
    )
    return efficientnet.EfficientNet(setting, 0.2, num_classes=10, last_channel=last)


def _convnext() -> nn.Module:
    setting = [
        convnext.CNBlockConfig(16, 32, 1),
        convnext.CNBlockConfig(32, 64, 1),
        convnext.CNBlockConfig(64, None, 1),
    ]
    # layer_scale 1e-6 (the constructor's default) would make every block an identity.
    return convnext.ConvNeXt(setting, layer_scale=0.5, num_classes=10)


def _fpn() -> nn.Module:
    return backbone_utils.resnet_fpn_backbone(
        backbone_name="resnet18", weights=None, trainable_layers=5
    )


tvm = torchvision.models
FAMILIES = [
    Family("resnet18", lambda: tvm.resnet18(num_classes=10), _img(32)),
    Family("mobilenet_v2", lambda: tvm.mobilenet_v2(num_classes=10, width_mult=0.35), _img(32)),
    Family(
        "mobilenet_v3_small",
        lambda: tvm.mobilenet_v3_small(num_classes=10, width_mult=0.5),
        _img(32),
    ),
    Family("efficientnet_b0", _efficientnet, _img(32)),
    Family(
        "densenet",
        lambda: tvm.DenseNet(8, (2, 2, 2, 2), 16, bn_size=2, num_classes=10),
        _img(32),
    ),
    Family("vgg", _vgg, _img(32)),
    Family(
        "googlenet",
        lambda: tvm.googlenet(num_classes=10, aux_logits=False, init_weights=True),
        _img(64),
    ),
    Family(
        "inception_v3",
        lambda: tvm.inception_v3(num_classes=10, aux_logits=False, init_weights=True),
        _img(75),
    ),
    Family("regnet_y_400mf", lambda: tvm.regnet_y_400mf(num_classes=10), _img(64)),
    Family("convnext", _convnext, _img(32)),
    Family(
        "deeplabv3_mobilenet_v3",
        lambda: segmentation.deeplabv3_mobilenet_v3_large(
            num_classes=3, weights_backbone=None, aux_loss=False
        ),
        _img(64),
        outputs=["out"],
    ),
    Family(
        "fcn_resnet50",
        lambda: segmentation.fcn_resnet50(num_classes=3, weights_backbone=None, aux_loss=False),
        _img(32),
        outputs=["out"],
    ),
    Family(
        "lraspp_mobilenet_v3",
        lambda: segmentation.lraspp_mobilenet_v3_large(num_classes=3, weights_backbone=None),
        _img(64),
        outputs=["out"],
    ),
    Family("fpn_resnet18", _fpn, _img(64), outputs=["0", "1", "2", "3", "pool"]),
    Family(
        "vit",
        lambda: tvm.VisionTransformer(
            image_size=32,
            patch_size=8,
            num_layers=2,
            num_heads=2,
            hidden_dim=32,
            mlp_dim=64,
            num_classes=10,
        ),
        _img(32),
    ),
    # Swin: shifted windows (torch.roll), relative position bias; its exports add Mod and
    # ScatterND on shape arithmetic.
    Family(
        "swin",
        lambda: swin_transformer.SwinTransformer(
            [4, 4], 16, [2, 2], [2, 2], [4, 4], num_classes=10
        ),
        _img(32),
    ),
    Family(
        "bert",
        _bert,
        _tokens("input_ids", "attention_mask"),
        outputs=["last_hidden_state", "pooler_output"],
    ),
    Family(
        "distilbert",
        _distilbert,
        _tokens("input_ids", "attention_mask"),
        outputs=["last_hidden_state"],
    ),
    # With an attention mask: without one, transformers looks for packed sequences with
    # torch.diff, which the TorchScript exporter cannot export.
    Family("gpt2", _gpt2, _tokens("input_ids", "attention_mask"), outputs=["logits"]),
    Family("t5", _t5, _tokens("input_ids", "decoder_input_ids"), outputs=["last_hidden_state"]),
    Family(
        "whisper_encoder",
        _whisper_encoder,
        {"input_features": ((1, 16, 32), "float32", 0)},
        outputs=["last_hidden_state"],
    ),
    Family(
        "wav2vec2",
        _wav2vec2,
        {"input_values": ((1, 400), "float32", 0)},
        outputs=["last_hidden_state"],
    ),
]
EXPORTERS = ("torchscript", "dynamo")


def _randomize(model: nn.Module, gen: torch.Generator) -> None:
    """Random weights that keep a deep net's activations at a steady scale (as training does)
    whatever exact values they take, so a stripped model refilled from per-row statistics
    behaves like the exported one: convolutions He-initialised from their true fan-in (the
    constructors use the fan-out, which makes depthwise weights vanish, or Inception's std 0.1,
    which makes its logits reach 1e9), parameters the constructors set to zero (biases, ViT's
    head) small and random, BatchNorm statistics and affine parameters random near identity
    (not calibrated on data: a refilled model would not match them)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.conv._ConvNd):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (2 / fan_in) ** 0.5)
        for p in model.parameters():
            if p.is_floating_point() and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)


def make_inputs(fam: Family) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    feeds: dict[str, np.ndarray] = {}
    for name, (shape, dtype, high) in fam.inputs.items():
        if dtype == "int64" and name == "attention_mask":
            mask = np.ones(shape, np.int64)
            mask[..., -2:] = 0  # two padding tokens, so the mask really masks
            feeds[name] = mask
        elif dtype == "int64":
            feeds[name] = rng.integers(1, high, shape).astype(np.int64)
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _ort_run(model_bytes: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def export(fam: Family, exporter: str, out: Path) -> str:
    import onnx

    torch.manual_seed(0)
    model = fam.make()
    _randomize(model, torch.Generator().manual_seed(1))
    wrapped = Outputs(model, list(fam.inputs), fam.outputs).eval()
    feeds = make_inputs(fam)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    with torch.no_grad():
        ref = wrapped(*args)
    refs = [ref] if isinstance(ref, torch.Tensor) else list(ref)
    # ONNX names must not start with a digit (the FPN's feature maps are "0".."3").
    out_names = [f"out_{k}" if k[0].isdigit() else k for k in fam.outputs or ["output"]]
    in_names = list(fam.inputs) if fam.inputs.keys() != {"x"} else ["input"]
    name = f"{fam.name}-{exporter}"
    path = out / f"{name}.onnx"
    if exporter == "dynamo":
        program = torch.onnx.export(
            wrapped,
            args,
            input_names=in_names,
            output_names=out_names,
            opset_version=18,
            dynamo=True,
            optimize=True,
        )
        proto = program.model_proto
    else:
        import io

        buf = io.BytesIO()
        torch.onnx.export(
            wrapped,
            args,
            buf,
            input_names=in_names,
            output_names=out_names,
            opset_version=17,
            dynamo=False,
        )
        proto = onnx.load_from_string(buf.getvalue())
    # The dynamo exporter annotates every node with its Python stack trace and FX node (local
    # paths of the exporting machine, two thirds of a file); the rest of its metadata stays.
    for node in proto.graph.node:
        keep = [p for p in node.metadata_props if p.key not in DROPPED_NODE_METADATA]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    onnx.checker.check_model(proto, full_check=True)
    feeds = dict(zip(in_names, feeds.values(), strict=True))
    got = _ort_run(proto.SerializeToString(), feeds)
    for g, r, o in zip(got, refs, out_names, strict=True):
        # atol relative to the largest output: deep nets with random weights give outputs in
        # the hundreds (LR-ASPP's upsampled logits: onnxruntime's Resize and PyTorch's
        # interpolate differ by 2e-4 of the largest).
        atol = 1e-3 * max(1.0, float(r.abs().max()))
        np.testing.assert_allclose(
            g, r.numpy(), rtol=1e-3, atol=atol, err_msg=f"{name}:{o}: onnxruntime vs PyTorch"
        )
    full = proto.SerializeToString()
    np.savez(out / f"{name}.input.npz", **feeds)
    if len(full) > STRIP_ABOVE:
        stored = strip(proto, SEED)
        # The test's reference: the refilled model must run in onnxruntime and stay finite.
        # The refilled model must behave like the original: finite, outputs of a similar scale
        # (a badly scaled refill amplifies rounding until no two runtimes agree; another draw
        # of a deep residual net's weights moves its outputs by ~50x, FCN's and RegNet's).
        refilled = _ort_run(refill(stored).SerializeToString(), feeds)
        for r, g, o in zip(refilled, got, out_names, strict=True):
            scale = float(np.abs(r).max()) / max(float(np.abs(g).max()), 1e-3)
            assert np.isfinite(r).all() and scale < 100, f"{name}:{o}: refilled x{scale:.1f}"
        how = "stripped"
        (out / f"{name}.expected.npz").unlink(missing_ok=True)
    else:
        stored = proto
        np.savez(out / f"{name}.expected.npz", **dict(zip(out_names, got, strict=True)))
        how = "full"
    data = stored.SerializeToString()
    path.write_bytes(data)
    ops = sorted({n.op_type for n in stored.graph.node})
    return f"{name:36s} {how:8s} {len(full):9d} -> {len(data):7d} B  {len(ops):3d} op types"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ZOO_DIR)
    ap.add_argument("--exporter", choices=EXPORTERS, action="append")
    ap.add_argument("names", nargs="*", help="export only these families")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    failed = 0
    for fam in FAMILIES:
        if args.names and fam.name not in args.names:
            continue
        for exporter in args.exporter or EXPORTERS:
            try:
                print(export(fam, exporter, args.out), flush=True)
            except Exception as exc:  # report every family, then fail
                failed += 1
                msg = str(exc).strip().splitlines()
                print(f"{fam.name}-{exporter}: FAILED {type(exc).__name__}: {msg[:8]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
