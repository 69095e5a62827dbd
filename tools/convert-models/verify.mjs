// Compare a converted ONNX model with the original TF.js graph model on the same inputs.
//
// usage: node verify.mjs MODEL TFJS_MODEL_JSON RAW_ONNX FINAL_ONNX TFJS_NODE_MODULES_PARENT [IMAGE ...]
//
// MODEL: centernet | blazeface | faceres | facemesh | mobileface. TF.js side: @tensorflow/tfjs (pure JS CPU backend) loaded
// from TFJS_NODE_MODULES_PARENT, which convert.sh fills with `npm install --prefix` outside the
// project. ONNX side: the project's onnxruntime-node; RAW_ONNX is tf2onnx's output, FINAL_ONNX the
// finished model. Inputs: each IMAGE letterboxed into the model's square input (sharp, centred, black
// padding) plus one deterministic noise image (FaceMesh also gets face and back-of-head crops cut
// from some of the images, so that its confidence is checked high as well as low); then all of them as
// one batch, which must equal the single runs. Prints one JSON line with the max abs differences and exits 1 if any exceeds its
// tolerance.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [kind, modelJson, rawOnnx, finalOnnx, tfjsPrefix, ...images] = process.argv.slice(2);
if (!['centernet', 'blazeface', 'faceres', 'facemesh', 'mobileface'].includes(kind) || !modelJson || !rawOnnx || !finalOnnx || !tfjsPrefix) {
  console.error('usage: node verify.mjs centernet|blazeface|faceres|facemesh|mobileface TFJS_MODEL_JSON RAW_ONNX FINAL_ONNX TFJS_PREFIX [IMAGE ...]');
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const projectRequire = createRequire(path.join(root, 'package.json'));
const ort = projectRequire('onnxruntime-node');
const sharp = projectRequire('sharp');
const tf = createRequire(path.join(path.resolve(tfjsPrefix), 'package.json'))('@tensorflow/tfjs');

async function letterboxed(file, size, box) {
  let img = sharp(readFileSync(file));
  if (box) img = img.extract({ left: box[0], top: box[1], width: box[2] - box[0], height: box[3] - box[1] });
  const { data } = await img
    .removeAlpha()
    .resize(size, size, { fit: 'contain', background: { r: 0, g: 0, b: 0 } })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return Float32Array.from(data);
}

function noise(size) {
  let s = 12345;
  const out = new Float32Array(size * size * 3);
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

/** Like maxAbsDiff, relative to the reference `a` where |a| > 1 (for raw heads whose values reach 1e4). */
function maxRelDiff(a, b) {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(a[i])));
  return m;
}

/**
 * Per model: the input size, the tolerances, one image's comparison (returns the differences and the
 * final model's outputs to compare the batch with), and the names of the final outputs.
 */
const MODELS = {
  centernet: {
    size: 512,
    tol: { keypoints: 1e-3, wh: 1e-2, detections: 1e-2 },
    outputs: ['detections'],
    async compare(data, tfModel, raw, fin) {
      const SIZE = 512;
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
      return {
        diffs: { keypoints: maxAbsDiff(kp, r['tower_0/keypoints:0'].data), wh: maxAbsDiff(wh, r['tower_0/wh:0'].data), detections: dDet },
        extra: { rowsCompared: rows, top: Array.from(oDet.slice(0, 6)) },
        outputs: f,
      };
    },
  },

  blazeface: {
    size: 256,
    // Raw heads: relative differences (logits reach -1e4 on black padding, regressors 1e3 px there);
    // decoded rows: absolute, boxes in input pixels and scores 0..1.
    tol: { logits: 1e-3, regressors: 1e-3, faces: 1e-2 },
    outputs: ['faces'],
    async compare(data, tfModel, raw, fin) {
      const SIZE = 256;
      // The TF.js model wants -1..1; the finished ONNX model takes 0..255 and scales itself.
      const x = tf.tidy(() => tf.sub(tf.div(tf.tensor4d(data, [1, SIZE, SIZE, 3]), 127.5), 1));
      const ts = tfModel.execute(x, ['Identity', 'Identity_1', 'Identity_2', 'Identity_3']);
      const [c16, c8, r16, r8] = ts.map((t) => t.dataSync());
      const scaled = x.dataSync();
      tf.dispose([x, ...ts]);

      const head = 'StatefulPartitionedCall/functional_1/';
      const r = await raw.run({ [raw.inputNames[0]]: new ort.Tensor('float32', scaled, [1, SIZE, SIZE, 3]) });
      const f = await fin.run({ images: new ort.Tensor('float32', data, [1, SIZE, SIZE, 3]) });
      // The ONNX heads are the NHWC convolution outputs the TF.js Reshapes flatten in the same order.
      const logits = Math.max(maxRelDiff(c16, r[`${head}conv2d_33/BiasAdd:0`].data), maxRelDiff(c8, r[`${head}conv2d_34/BiasAdd:0`].data));
      const regressors = Math.max(maxRelDiff(r16, r[`${head}conv2d_35/BiasAdd:0`].data), maxRelDiff(r8, r[`${head}conv2d_36/BiasAdd:0`].data));

      // Decode the TF.js heads as the human library does (anchors at cell centres, pixels, sigmoid).
      const expected = new Float32Array(896 * 5);
      let a = 0;
      for (const [stride, perCell, cls, reg] of [[16, 2, c16, r16], [32, 6, c8, r8]]) {
        const cells = SIZE / stride;
        for (let i = 0; i < cells * cells * perCell; i++, a++) {
          const cell = Math.floor(i / perCell);
          const ax = stride * ((cell % cells) + 0.5);
          const ay = stride * (Math.floor(cell / cells) + 0.5);
          const [dx, dy, w, h] = reg.subarray(i * 16, i * 16 + 4);
          expected.set([ax + dx - w / 2, ay + dy - h / 2, ax + dx + w / 2, ay + dy + h / 2, 1 / (1 + Math.exp(-cls[i]))], a * 5);
        }
      }
      const faces = f.faces.data;
      let best = 0;
      for (let i = 1; i < 896; i++) if (faces[i * 5 + 4] > faces[best * 5 + 4]) best = i;
      return {
        diffs: { logits, regressors, faces: maxAbsDiff(expected, faces) },
        extra: { best: Array.from(faces.slice(best * 5, best * 5 + 5)) },
        outputs: f,
      };
    },
  },

  faceres: {
    size: 224,
    tol: { gender: 1e-4, age: 1e-4, features: 1e-3 },
    outputs: ['gender', 'age', 'features'],
    async compare(data, tfModel, raw, fin) {
      const SIZE = 224;
      const x = tf.tensor4d(data, [1, SIZE, SIZE, 3]);
      const ts = tfModel.execute(x, ['gender_pred/Sigmoid', 'age_pred/Softmax', 'global_pooling/Mean']);
      const [gender, age, features] = ts.map((t) => t.dataSync());
      tf.dispose([x, ...ts]);
      const feed = new ort.Tensor('float32', data, [1, SIZE, SIZE, 3]);
      const r = await raw.run({ [raw.inputNames[0]]: feed });
      const f = await fin.run({ images: feed });
      const rawVsFinal = maxAbsDiff(r['age_pred/Softmax:0'].data, f.age.data);
      if (rawVsFinal !== 0) throw new Error(`faceres: renaming changed the age output by ${rawVsFinal}`);
      return {
        diffs: { gender: maxAbsDiff(gender, f.gender.data), age: maxAbsDiff(age, f.age.data), features: maxAbsDiff(features, f.features.data) },
        extra: { male: f.gender.data[0] },
        outputs: f,
      };
    },
  },

  mobileface: {
    size: 112,
    tol: { features: 1e-3 },
    outputs: ['features'],
    async compare(data, tfModel, raw, fin) {
      const SIZE = 112;
      const x = tf.tensor4d(data, [1, SIZE, SIZE, 3]);
      const t = tfModel.execute(x, 'batchnorm0/add_1');
      const features = t.dataSync();
      tf.dispose([x, t]);
      const feed = new ort.Tensor('float32', data, [1, SIZE, SIZE, 3]);
      const r = await raw.run({ [raw.inputNames[0]]: feed });
      const f = await fin.run({ images: feed });
      const rawVsFinal = maxAbsDiff(r['batchnorm0/add_1:0'].data, f.features.data);
      if (rawVsFinal !== 0) throw new Error(`mobileface: renaming changed the features by ${rawVsFinal}`);
      return { diffs: { features: maxAbsDiff(features, f.features.data) }, extra: {}, outputs: f };
    },
  },

  facemesh: {
    size: 192,
    // Face crops as the billboard app cuts them (BlazeFace box + 25 %, in the image's pixels, x1 y1 x2 y2):
    // three real faces (confidence 0.91..1 here, letterboxed by sharp) and two backs of heads (< 0.02).
    crops: {
      'face-classroom-15.jpg': [[30, 50, 63, 83], [90, 30, 113, 53], [269, 54, 301, 86]],
      'back-of-head-1.jpg': [[65, 21, 122, 78]],
      'back-of-head-2.jpg': [[54, 40, 112, 98]],
    },
    // Confidence 0..1; mesh and box in input pixels (0..192).
    tol: { confidence: 1e-4, mesh: 1e-2, face: 1e-2 },
    outputs: ['face', 'mesh'],
    async compare(data, tfModel, raw, fin) {
      const SIZE = 192;
      // The TF.js model wants 0..1 (the human library divides its crop by 255); the ONNX model scales itself.
      const x = tf.tidy(() => tf.div(tf.tensor4d(data, [1, SIZE, SIZE, 3]), 255));
      const ts = tfModel.execute(x, ['Identity_1', 'Identity_2']); // output_faceflag [1,1], output_mesh [1,1404]
      const [flag, mesh] = ts.map((t) => t.dataSync());
      const scaled = x.dataSync();
      tf.dispose([x, ...ts]);
      const head = 'StatefulPartitionedCall/model_1/';
      const r = await raw.run({ [raw.inputNames[0]]: new ort.Tensor('float32', scaled, [1, SIZE, SIZE, 3]) });
      const f = await fin.run({ images: new ort.Tensor('float32', data, [1, SIZE, SIZE, 3]) });
      // The landmarks' bounding box and the confidence, from the TF.js outputs.
      const expected = [Infinity, Infinity, -Infinity, -Infinity, flag[0]];
      for (let i = 0; i < mesh.length; i += 3) {
        expected[0] = Math.min(expected[0], mesh[i]);
        expected[1] = Math.min(expected[1], mesh[i + 1]);
        expected[2] = Math.max(expected[2], mesh[i]);
        expected[3] = Math.max(expected[3], mesh[i + 1]);
      }
      return {
        diffs: {
          confidence: Math.max(maxAbsDiff(flag, r[`${head}output_faceflag/Reshape:0`].data), maxAbsDiff(flag, [f.face.data[4]])),
          mesh: Math.max(maxAbsDiff(mesh, r[`${head}output_mesh/Reshape:0`].data), maxAbsDiff(mesh, f.mesh.data)),
          face: maxAbsDiff(expected, f.face.data),
        },
        extra: { face: Array.from(f.face.data) },
        outputs: f,
      };
    },
  },
};

const spec = MODELS[kind];
const inputs = [];
for (const f of images) inputs.push({ name: path.basename(f), data: await letterboxed(f, spec.size) });
for (const f of images) {
  for (const box of spec.crops?.[path.basename(f)] ?? []) inputs.push({ name: `${path.basename(f)}[${box.join(',')}]`, data: await letterboxed(f, spec.size, box) });
}
inputs.push({ name: 'noise', data: noise(spec.size) });

await tf.setBackend('cpu');
const tfModel = await loadTfjs();
const raw = await ort.InferenceSession.create(rawOnnx);
const fin = await ort.InferenceSession.create(finalOnnx);

const report = { model: kind, inputs: [], max: { ...Object.fromEntries(Object.keys(spec.tol).map((k) => [k, 0])), batchVsSingle: 0 } };
const singles = [];
for (const { name, data } of inputs) {
  const { diffs, extra, outputs } = await spec.compare(data, tfModel, raw, fin);
  singles.push(outputs);
  report.inputs.push({ name, ...diffs, ...extra });
  for (const [k, v] of Object.entries(diffs)) report.max[k] = Math.max(report.max[k], v);
}

// Batch: all inputs in one run must equal the single runs.
const n = inputs.length;
const block = spec.size * spec.size * 3;
const batch = new Float32Array(n * block);
inputs.forEach((inp, i) => batch.set(inp.data, i * block));
const fb = await fin.run({ images: new ort.Tensor('float32', batch, [n, spec.size, spec.size, 3]) });
for (const out of spec.outputs) {
  const all = fb[out];
  if (all.dims[0] !== n) throw new Error(`batch dims of ${out}: ${all.dims}`);
  const per = all.data.length / n;
  for (let i = 0; i < n; i++) {
    const d = maxAbsDiff(all.data.subarray(i * per, (i + 1) * per), singles[i][out].data);
    report.max.batchVsSingle = Math.max(report.max.batchVsSingle, d);
  }
}
report.batch = n;
console.log(JSON.stringify(report));
const bad = Object.entries(spec.tol).filter(([k, t]) => report.max[k] > t);
if (bad.length > 0 || report.max.batchVsSingle > 1e-3) {
  console.error(`verify ${kind}: FAILED, over tolerance: ${bad.map(([k]) => k).join(', ')} batchVsSingle=${report.max.batchVsSingle}`);
  process.exit(1);
}
console.error(`verify ${kind}: OK`);
