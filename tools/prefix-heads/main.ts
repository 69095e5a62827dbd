// Builds models with different heads on one backbone, for prefix batching (Nexus §6.3):
//   npx tsx tools/prefix-heads/main.ts --out <dir> [--heads 2] [--layers 1] [--scale 0.1] [--seed 1] [--model models/centernet.onnx]
// writes <dir>/head-<i>.onnx (the whole models; head 0 is the original) and the same models split
// at their shared prefix, <dir>/prefix.onnx and <dir>/suffix-<i>.onnx, and prints what it wrote as JSON.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readOnnxModel } from '../../analyzers/index.js';
import { projectRoot } from '../../core/index.js';
import { writeHeads } from './heads.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    heads: { type: 'string', default: '2' },
    layers: { type: 'string', default: '1' },
    scale: { type: 'string', default: '0.1' },
    seed: { type: 'string', default: '1' },
    model: { type: 'string', default: join(projectRoot(), 'models/centernet.onnx') },
  },
});
if (!values.out) {
  console.error('usage: npx tsx tools/prefix-heads/main.ts --out <dir> [--heads 2] [--layers 1] [--scale 0.1] [--seed 1] [--model <file.onnx>]');
  process.exit(1);
}
const written = await writeHeads(await readOnnxModel(values.model), values.out, {
  heads: Number(values.heads),
  layers: Number(values.layers),
  scale: Number(values.scale),
  seed: Number(values.seed),
});
console.log(JSON.stringify(written, null, 2));
