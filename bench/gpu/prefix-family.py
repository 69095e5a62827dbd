"""A prefix family on a GPU: CenterNet and a variant with its own head (tools/prefix-heads),
run apart (each member on its half of the batch) and as a family (the prefix once on the whole
batch, each suffix on its half), beside one member on the whole batch. The networks run in
PyTorch through onnx2torch, without the decoder (post-processing; onnx2torch lacks batched
GatherND). Needs CUDA, torch, onnx and onnx2torch. Prints one line per batch and writes
$OUT/gpu.json (default /tmp).

    npx tsx tools/prefix-heads/main.ts --out .cache/gpu/heads --scale 0.3
    HEADS=.cache/gpu/heads python3 bench/gpu/prefix-family.py

The figures in docs/scheduler.md came from this script on an H100.
"""
import json, os, sys, traceback
import onnx
import onnx.utils
import torch
from onnx2torch import convert

D = os.environ.get('HEADS', '.cache/gpu/heads')
OUT = os.environ.get('OUT', '/tmp')
res = {'device': torch.cuda.get_device_name(0), 'torch': torch.__version__}


def save():
    with open(f'{OUT}/gpu.json', 'w') as f:
        json.dump(res, f, indent=1)


def network(name):
    # The network alone: the decoder (peaks, TopK, GatherND) is post-processing, and onnx2torch lacks batched GatherND.
    path = f'{D}/{name}.onnx'
    m = onnx.load(path)
    g = m.graph
    produced = {o: n.name for n in g.node for o in n.output}
    decode = [n for n in g.node if n.name.startswith('decode/')]
    if not decode:
        return m
    feeds = []
    for n in decode:
        for i in n.input:
            if i in produced and not produced[i].startswith('decode/') and i not in feeds:
                feeds.append(i)
    inputs = [i.name for i in g.input if i.name not in {t.name for t in g.initializer}]
    onnx.utils.extract_model(path, f'/tmp/{name}-net.onnx', inputs, feeds, check_model=False)
    return onnx.load(f'/tmp/{name}-net.onnx')


try:
    load = lambda name: convert(network(name)).cuda().eval()
    whole = [load('head-0'), load('head-1')]
    prefix = load('prefix')
    suffix = [load('suffix-0'), load('suffix-1')]
    p_out = [o.name for o in onnx.load(f'{D}/prefix.onnx').graph.output]
    s_in = [[i.name for i in onnx.load(f'{D}/suffix-{k}.onnx').graph.input if i.name in p_out] for k in range(2)]
    res['prefix_outputs'], res['suffix_inputs'] = p_out, s_in
except Exception:
    res['error'] = traceback.format_exc()
    save(); print(res['error']); sys.exit(1)


def timeit(fn, reps=30, warm=5):
    with torch.inference_mode():
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record(); torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
    times.sort()
    return round(times[len(times) // 2], 3)


as_tuple = lambda y: tuple(y) if isinstance(y, (tuple, list)) else (y,)
rows = []
try:
    for batch in [2, 4, 8, 16, 32, 64]:
        x = torch.rand(batch, 512, 512, 3, device='cuda') * 255
        h = batch // 2

        def family():
            named = dict(zip(p_out, as_tuple(prefix(x))))
            for k, part in enumerate((slice(0, h), slice(h, batch))):
                suffix[k](*[named[n][part] for n in s_in[k]])

        row = {
            'batch': batch,
            'oneMemberMs': timeit(lambda: whole[0](x)),
            'apartMs': timeit(lambda: (whole[0](x[:h]), whole[1](x[h:]))),
            'familyMs': timeit(family),
        }
        rows.append(row); print(row, flush=True)
except Exception:
    res['error'] = traceback.format_exc(); print(res['error'])
res['rows'] = rows
save()
