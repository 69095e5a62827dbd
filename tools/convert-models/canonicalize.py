"""Make an ONNX graph from tf2onnx byte-for-byte reproducible.

tf2onnx's optimizers visit nodes through Python sets of node objects, so from run to run the node order,
the `__<counter>` suffixes of generated names, and which of several equal constants survives
constant de-duplication all vary, while the computation is the same. This rewrites the graph into one
canonical form:

* Reshapes that do not change their input's shape (e.g. `[batch,128,1,1]` to `[-1,128,1,1]`) are
  removed: tf2onnx's optimizers remove such a Reshape in some runs and keep it in others;
* initializers with equal dtype, shape and bytes are merged and named `const_<sha256 prefix>`, and
  ones no node reads are dropped;
* nodes are ordered by a topological sort that breaks ties with a structural hash of each node (its op,
  attributes and, recursively, what feeds it), which does not depend on names;
* a node structurally identical to one already placed is dropped and its consumers read the first;
* generated names (`..__<n>`) of nodes and of the tensors they produce are renumbered in that order;
  names that come from the TensorFlow graph, and the graph's inputs and outputs, are kept.

It also holds the finishing scripts' shared last steps: `prune_to_outputs` and `save_checked`.
"""

import hashlib
import heapq
import re

import numpy as np
import onnx
from onnx import numpy_helper

COUNTER = re.compile(r"__\d+")


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def _static_dims(vi: onnx.ValueInfoProto) -> list[int | None] | None:
    """A tensor's dims, None for a symbolic one; None when its rank is unknown."""
    if not vi.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]


def _is_noop_reshape(dims: list[int | None], target: list[int]) -> bool:
    if len(dims) != len(target):
        return False
    same = [t == 0 or (d is not None and t == d) for d, t in zip(dims, target)]
    loose = [k for k, ok in enumerate(same) if not ok]
    # At most one axis may differ, and only as the inferred (-1) axis.
    return not loose or (len(loose) == 1 and target[loose[0]] == -1)


def remove_noop_reshapes(model: onnx.ModelProto) -> int:
    """Drops every Reshape whose constant target shape equals its input's shape; returns how many."""
    g = model.graph
    graph_outputs = {o.name for o in g.output}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {vi.name: _static_dims(vi) for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
    alias: dict[str, str] = {}
    keep = []
    for node in g.node:
        if node.op_type == "Reshape" and len(node.input) == 2 and node.input[1] in consts and node.output[0] not in graph_outputs:
            dims = shapes.get(node.input[0])
            allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
            if dims is not None and not allowzero and _is_noop_reshape(dims, [int(v) for v in consts[node.input[1]].reshape(-1)]):
                alias[node.output[0]] = node.input[0]
                continue
        keep.append(node)

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    for node in keep:
        for k, name in enumerate(node.input):
            node.input[k] = resolve(name)
    del g.node[:]
    g.node.extend(keep)
    return len(alias)


def canonicalize(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    graph_inputs = {i.name for i in g.input}
    graph_outputs = {o.name for o in g.output}

    # 0. Reshapes that change nothing.
    remove_noop_reshapes(model)

    # 1. Initializers: merge equal ones under a content name; drop unread ones.
    read = {name for node in g.node for name in node.input}
    rename: dict[str, str] = {}
    inits: dict[str, onnx.TensorProto] = {}
    for t in g.initializer:
        if t.name not in read:
            continue
        arr = numpy_helper.to_array(t)
        name = "const_" + _digest(str(arr.dtype).encode(), str(arr.shape).encode(), arr.tobytes())[:16]
        rename[t.name] = name
        if name not in inits:
            inits[name] = numpy_helper.from_array(arr, name)
    for node in g.node:
        for k, name in enumerate(node.input):
            if name in rename:
                node.input[k] = rename[name]

    # 2. Structural hash of every node, in any topological order.
    producer = {out: node for node in g.node for out in node.output if out}
    node_hash: dict[int, str] = {}

    def tensor_key(name: str) -> bytes:
        if not name:
            return b""
        if name in inits:
            return name.encode()
        if name in graph_inputs:
            return b"input:" + name.encode()
        p = producer[name]
        return (node_hash[id(p)] + ":" + str(list(p.output).index(name))).encode()

    pending = list(g.node)
    while pending:
        rest = []
        for node in pending:
            if all((not i) or i in inits or i in graph_inputs or id(producer[i]) in node_hash for i in node.input):
                attrs = sorted((a.name, a.SerializeToString(deterministic=True)) for a in node.attribute)
                parts = [node.op_type.encode(), node.domain.encode()]
                parts += [n.encode() + b"=" + v for n, v in attrs]
                parts += [tensor_key(i) for i in node.input]
                parts += [str(len(node.output)).encode()]
                # Names that come from TensorFlow (no counter) are stable; use them to tell apart
                # structurally equal nodes.
                parts += [COUNTER.sub("", node.name).encode()]
                node_hash[id(node)] = _digest(*parts)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise RuntimeError("graph has a cycle or a dangling input")
        pending = rest

    # 3. Topological order, ties broken by the structural hash.
    consumers: dict[str, list[onnx.NodeProto]] = {}
    indegree: dict[int, int] = {}
    for node in g.node:
        deps = {i for i in node.input if i and i in producer}
        indegree[id(node)] = len(deps)
        for i in deps:
            consumers.setdefault(i, []).append(node)
    tick = 0  # unique second key: the heap never compares nodes
    heap = []
    for n in g.node:
        if indegree[id(n)] == 0:
            tick += 1
            heap.append((node_hash[id(n)], tick, n))
    heapq.heapify(heap)
    order: list[onnx.NodeProto] = []
    first_with_hash: dict[str, onnx.NodeProto] = {}
    alias: dict[str, str] = {}
    while heap:
        h, _, node = heapq.heappop(heap)
        twin = first_with_hash.get(h)
        if twin is not None and not (set(node.output) & graph_outputs):
            # Structurally identical to a node already placed: it computes the same values, so its
            # consumers read the twin's outputs instead (common-subexpression elimination).
            alias.update(zip(node.output, twin.output))
        else:
            first_with_hash.setdefault(h, node)
            order.append(node)
        for out in node.output:
            for c in consumers.get(out, []):
                indegree[id(c)] -= 1
                if indegree[id(c)] == 0:
                    tick += 1
                    heapq.heappush(heap, (node_hash[id(c)], tick, c))

    # 4. Renumber generated names in that order.
    counter = 0
    tensor_rename: dict[str, str] = {}

    def fresh(name: str) -> str:
        nonlocal counter
        counter += 1
        return COUNTER.sub("", name) + f"__{counter}"

    for node in order:
        if COUNTER.search(node.name):
            node.name = fresh(node.name)
        for k, out in enumerate(node.output):
            if out and out not in graph_outputs and COUNTER.search(out):
                tensor_rename[out] = fresh(out)
                node.output[k] = tensor_rename[out]
    for node in order:
        for k, name in enumerate(node.input):
            name = alias.get(name, name)
            node.input[k] = tensor_rename.get(name, name)

    del g.node[:]
    g.node.extend(order)
    del g.initializer[:]
    g.initializer.extend(inits[k] for k in sorted(inits))
    del g.value_info[:]
    return model


def prune_to_outputs(g: onnx.GraphProto) -> None:
    """Drops the nodes and initializers that no longer feed one of the graph's outputs.

    For scripts that replace tf2onnx's outputs: what fed only the old ones (e.g. a head asked for the
    check alone) would otherwise stay in the file. Walks the nodes backwards, so a node must come after
    everything it reads, as tf2onnx writes them.
    """
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [i for i in g.initializer if i.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)


def save_checked(model: onnx.ModelProto, dst: str) -> None:
    """Writes a finished graph in canonical form, after checking it.

    tf2onnx's value_info describes the graph before the finishing script edited it, so it is dropped
    first (canonicalize's own shape inference must not read it); shapes are then inferred afresh, in
    strict mode so that a graph whose shapes do not fit fails here rather than in the runner.
    """
    del model.graph.value_info[:]
    model = canonicalize(model)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, dst)


def rename_input(g: onnx.GraphProto, raw: str, feeds: str) -> None:
    """Names tf2onnx's input `raw` `images`, with a symbolic `batch` dimension, as every zoo model
    takes it; the nodes that read `raw` read `feeds` instead (`images` itself, or the output of a
    scaling node the script puts in front)."""
    inp = next(i for i in g.input if i.name == raw)
    inp.name = "images"
    inp.type.tensor_type.shape.dim[0].dim_param = "batch"
    for node in g.node:
        for k, name in enumerate(node.input):
            if name == raw:
                node.input[k] = feeds


def const(name: str, value, dtype) -> onnx.TensorProto:
    """An initializer holding `value` as an array of `dtype`."""
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)
