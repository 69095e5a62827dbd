// Compare the converted ONNX CenterNet with the original TF.js graph model on the same inputs.
//
// usage: node verify.mjs TFJS_MODEL_JSON RAW_ONNX FINAL_ONNX TFJS_NODE_MODULES_PARENT [IMAGE ...]
//
// TF.js side: @tensorflow/tfjs (pure JS CPU backend) loaded from TFJS_NODE_MODULES_PARENT, which
// convert.sh fills with `npm install --prefix` outside the project. ONNX side: the project's
// onnxruntime-node. Inputs: each IMAGE letterboxed into 512x512 (sharp, centred, black padding) plus
// one deterministic noise image. Prints one JSON line with the max abs differences and exits 1 if
// any exceeds its tolerance.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [modelJson, rawOnnx, finalOnnx, tfjsPrefix, ...images] = process.argv.slice(2);
if (!modelJson || !rawOnnx || !finalOnnx || !tfjsPrefix) {
  console.error('usage: node verify.mjs TFJS_MODEL_JSON RAW_ONNX FINAL_ONNX TFJS_PREFIX [IMAGE ...]');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const projectRequire = createRequire(path.join(root, 'package.json'));
const ort = projectRequire('onnxruntime-node');
const sharp = projectRequire('sharp');
const tf = createRequire(path.join(path.resolve(tfjsPrefix), 'package.json'))('@tensorflow/tfjs');

const SIZE = 512;
const TOL = { keypoints: 1e-3, wh: 1e-2, detections: 1e-2 };

async function letterboxed(file) {
  const { data } = await sharp(readFileSync(file))
    .removeAlpha()
    .resize(SIZE, SIZE, { fit: 'contain', background: { r: 0, g: 0, b: 0 } })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return Float32Array.from(data);
}

function noise() {
  let s = 12345;
  const out = new Float32Array(SIZE * SIZE * 3);
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    out[i] = (s >>> 16) % 256;
  }
  return out;
}

function loadTfjs() {
  const json = JSON.parse(readFileSync(modelJson, 'utf8'));
  const dir = path.dirname(modelJson);
  const buffers = json.weightsManifest.flatMap((g) => g.paths.map((p) => readFileSync(path.join(dir, p))));
  const all = Buffer.concat(buffers);
  return tf.loadGraphModel(
    tf.io.fromMemory({
      modelTopology: json.modelTopology,
      format: json.format,
      generatedBy: json.generatedBy,
      convertedBy: json.convertedBy,
      signature: json.signature,
      weightSpecs: json.weightsManifest.flatMap((g) => g.weights),
      weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
    }),
  );
}

function maxAbsDiff(a, b) {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const inputs = [];
for (const f of images) inputs.push({ name: path.basename(f), data: await letterboxed(f) });
inputs.push({ name: 'noise', data: noise() });

await tf.setBackend('cpu');
const tfModel = await loadTfjs();
const raw = await ort.InferenceSession.create(rawOnnx);
const fin = await ort.InferenceSession.create(finalOnnx);

const report = { inputs: [], max: { keypoints: 0, wh: 0, detections: 0, batchVsSingle: 0 } };
const singles = [];
for (const { name, data } of inputs) {
  const x = tf.tensor4d(data, [1, SIZE, SIZE, 3]);
  const [kpT, whT, detT] = tfModel.execute(x, ['tower_0/keypoints', 'tower_0/wh', 'tower_0/detections']);
  const kp = kpT.dataSync();
  const wh = whT.dataSync();
  const det = detT.dataSync();
  tf.dispose([x, kpT, whT, detT]);

  const feed = { images: new ort.Tensor('float32', data, [1, SIZE, SIZE, 3]) };
  const r = await raw.run({ [raw.inputNames[0]]: feed.images });
  const f = await fin.run(feed);
  const oDet = f.detections.data;
  singles.push(oDet);

  const dKp = maxAbsDiff(kp, r['tower_0/keypoints:0'].data);
  const dWh = maxAbsDiff(wh, r['tower_0/wh:0'].data);
  // Rows are sorted by score; compare those that matter (score >= 0.05). Further down, scores get tiny
  // and close, and TopK may legitimately order (near-)equal values differently.
  let dDet = 0;
  let rows = 0;
  for (let i = 0; i < 100; i++) {
    const s = det[i * 6 + 4];
    if (s < 0.05) break;
    rows++;
    for (let k = 0; k < 6; k++) dDet = Math.max(dDet, Math.abs(det[i * 6 + k] - oDet[i * 6 + k]));
  }
  report.inputs.push({ name, keypoints: dKp, wh: dWh, detections: dDet, rowsCompared: rows, top: Array.from(oDet.slice(0, 6)) });
  report.max.keypoints = Math.max(report.max.keypoints, dKp);
  report.max.wh = Math.max(report.max.wh, dWh);
  report.max.detections = Math.max(report.max.detections, dDet);
}

// Batch: all inputs in one run must equal the single runs.
const n = inputs.length;
const batch = new Float32Array(n * SIZE * SIZE * 3);
inputs.forEach((inp, i) => batch.set(inp.data, i * SIZE * SIZE * 3));
const fb = await fin.run({ images: new ort.Tensor('float32', batch, [n, SIZE, SIZE, 3]) });
if (fb.detections.dims.join(',') !== `${n},100,6`) throw new Error(`batch dims ${fb.detections.dims}`);
for (let i = 0; i < n; i++) {
  const d = maxAbsDiff(fb.detections.data.subarray(i * 600, (i + 1) * 600), singles[i]);
  report.max.batchVsSingle = Math.max(report.max.batchVsSingle, d);
}
report.batch = n;
console.log(JSON.stringify(report));
const bad = Object.entries(TOL).filter(([k, t]) => report.max[k] > t);
if (bad.length > 0 || report.max.batchVsSingle > 1e-3) {
  console.error(`verify: FAILED, over tolerance: ${bad.map(([k]) => k).join(', ')} batchVsSingle=${report.max.batchVsSingle}`);
  process.exit(1);
}
console.error('verify: OK');
