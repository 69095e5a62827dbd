"""Copy a TF.js graph model into a work folder, filling in node attributes the TF.js JSON leaves out.

The TF.js converter drops attributes whose value equals the op's default at the time it ran. tf2onnx's
TF.js loader rebuilds each node as a TensorFlow NodeDef and asks the installed TensorFlow for its output
shapes and dtypes, and current TensorFlow releases have added attributes since the model was exported:

* `_FusedConv2D` gained `TArgs` (the dtypes of the fused bias/activation arguments; no default).
* `TopKV2` gained `index_type` (default int32).

Without them tf2onnx stops with "NodeDef missing attr 'TArgs'" and "KeyError: 'index_type'". This
script adds every missing attribute that has a default in the installed TensorFlow's op registry, and
sets `TArgs` to `num_args` copies of `T`. Nothing else in the graph or the weights changes.

usage: python prepare_tfjs.py SRC_MODEL_JSON DEST_DIR
"""

import json
import shutil
import sys
from pathlib import Path

from google.protobuf import json_format
from tensorflow.python.framework import op_def_registry

# TF.js op names that tf2onnx maps to a TensorFlow op of another name before asking TensorFlow.
TFJS_OP_ALIASES = {"FusedDepthwiseConv2dNative": "_FusedDepthwiseConv2dNative"}


def fill_attrs(node: dict) -> list[str]:
    op = TFJS_OP_ALIASES.get(node["op"], node["op"])
    op_def = op_def_registry.get(op)
    if op_def is None:
        return []
    attrs = node.setdefault("attr", {})
    added = []
    for a in op_def.attr:
        if a.name in attrs:
            continue
        if a.name == "TArgs" and "num_args" in attrs and "T" in attrs:
            n = int(attrs["num_args"].get("i", "0"))
            attrs["TArgs"] = {"list": {"type": [attrs["T"]["type"]] * n}}
            added.append(a.name)
        elif a.HasField("default_value"):
            # Same JSON mapping of AttrValue that the TF.js converter writes.
            attrs[a.name] = json_format.MessageToDict(a.default_value)
            added.append(a.name)
    return added


def main() -> None:
    src = Path(sys.argv[1])
    dest = Path(sys.argv[2])
    dest.mkdir(parents=True, exist_ok=True)
    model = json.loads(src.read_text())
    counts: dict[str, int] = {}
    nodes = list(model["modelTopology"].get("node", []))
    for fn in model["modelTopology"].get("library", {}).get("function", []):
        nodes += fn.get("nodeDef", [])
    for node in nodes:
        for name in fill_attrs(node):
            key = f"{node['op']}.{name}"
            counts[key] = counts.get(key, 0) + 1
    (dest / src.name).write_text(json.dumps(model))
    for group in model["weightsManifest"]:
        for p in group["paths"]:
            shutil.copyfile(src.parent / p, dest / p)
    for key, n in sorted(counts.items()):
        print(f"prepare_tfjs: added {key} to {n} node(s)")


if __name__ == "__main__":
    main()
