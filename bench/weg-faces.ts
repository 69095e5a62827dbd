// The faces workload of `npm run bench -- weg`: the faces in the shared clips, found as the
// billboard app finds them (CenterNet's people, BlazeFace in the top of each, FaceMesh confirming
// a face turned to the camera). The oracle is FaceRes' 1024-d descriptor with the enrolled
// identity nearest to it; identities are enrolled by clustering every face's descriptor. The
// template is MobileFace (256-d), its top layer retrained on the dominant identities + "other".
import { readFileSync } from 'node:fs';
import { cropImage, loadFeatureExtractor, unitVector, loadModelRunner, type ModelRuntime, type RgbImage } from '../analyzers/index.js';
import type { ResolvedModel } from '../core/index.js';
import { cachedCrops, cropsOfClip, featuresOf, type Crop } from './weg-crops.js';
import type { Workload } from './weg.js';

const CLIPS: readonly [string, number][] = [
  ['one-by-one-person-detection.mp4', 10],
  ['classroom.gif', 15],
  ['face-demographics-walking.gif', 12],
  ['store-aisle-detection.gif', 15],
  ['worker-zone-detection.gif', 15],
  ['people-detection.gif', 12],
  ['person-bicycle-car-detection.gif', 12],
];
/** Two faces are one identity from this cosine similarity of their descriptors on (the leader clustering's threshold). */
const SAME_IDENTITY = 0.7;
/** A cluster is enrolled as an identity with at least this many faces; every face is then the enrolled identity nearest to it. */
const MIN_FACES = 10;


/** The faces in the shared clips, as the billboard app finds them (cached under `.cache/`). */
export async function faceCrops(runtime: ModelRuntime, zoo: Readonly<Record<string, ResolvedModel>>): Promise<Crop[]> {
  const key = [JSON.stringify({ CLIPS }), ...['centernet', 'blazeface', 'facemesh'].map((m) => readFileSync(zoo[m]!.file))];
  return cachedCrops('faces', key, async () => {
    const [people, heads, faces] = await Promise.all(['centernet', 'blazeface', 'facemesh'].map((m) => loadModelRunner(zoo[m]!, runtime)));
    const personParams = people!.parseParams({ minScore: 0.4, classes: ['person'] });
    const headParams = heads!.parseParams({ maxDetections: 1 });
    const faceParams = faces!.parseParams({});
    const all: Crop[] = [];
    for (const [clip, fps] of CLIPS) {
      all.push(
        ...(await cropsOfClip(clip, fps, 8, async (frames) =>
          Promise.all(
            (await people!.run(frames, frames.map(() => personParams))).map(async (output, i) => {
              if (output.kind !== 'detections' || output.detections.length === 0) return [];
              // The top 45% of each person, where a standing person's head is (the billboard app's region).
              const tops = output.detections.map(({ box }) => cropImage(frames[i]!, { ...box, y2: box.y1 + 0.45 * (box.y2 - box.y1) }, 0.05 * (box.x2 - box.x1)));
              const found = await heads!.run(tops, tops.map(() => headParams));
              const candidates = found.flatMap((h, k) => (h.kind === 'detections' && h.detections[0] ? [cropImage(tops[k]!, h.detections[0].box, 0.25 * (h.detections[0].box.x2 - h.detections[0].box.x1))] : []));
              if (candidates.length === 0) return [];
              const confirmed = await faces!.run(candidates, candidates.map(() => faceParams));
              return candidates.filter((_, k) => confirmed[k]!.kind === 'detections' && (confirmed[k] as { detections: unknown[] }).detections.length > 0);
            }),
          ),
        )),
      );
    }
    await Promise.all([people!.dispose(), heads!.dispose(), faces!.dispose()]);
    return all;
  });
}

export async function facesWorkload(runtime: ModelRuntime, zoo: Readonly<Record<string, ResolvedModel>>): Promise<Workload> {
  console.log('faces: faces in the shared clips (CenterNet people, BlazeFace in the top of each, FaceMesh confirming)');
  const crops = await faceCrops(runtime, zoo);

  // Enrol identities: leader clustering of the descriptors, in the clips' order.
  const descriptor = await loadFeatureExtractor({ ...zoo.faceres!, inputSize: 224 }, runtime);
  const descriptors = normalized(await featuresOf(descriptor, crops.map((c) => c.image)), descriptor.featureCount);
  const size = descriptor.featureCount;
  const sums: Float32Array[] = [];
  for (let r = 0; r < crops.length; r++) {
    const row = descriptors.subarray(r * size, (r + 1) * size);
    const [best, similarity] = nearest(row, sums.map((s) => unitVector(s)));
    if (best >= 0 && similarity >= SAME_IDENTITY) add(sums[best]!, row);
    else sums.push(Float32Array.from(row));
  }
  const enrolled: Float32Array[] = [];
  const counts = new Map<number, number>();
  const centres = sums.map((s) => unitVector(s));
  for (let r = 0; r < crops.length; r++) {
    const [best] = nearest(descriptors.subarray(r * size, (r + 1) * size), centres);
    counts.set(best, (counts.get(best) ?? 0) + 1);
  }
  centres.forEach((centre, i) => {
    if ((counts.get(i) ?? 0) >= MIN_FACES) enrolled.push(centre);
  });

  const identify = (rows: Float32Array): string[] =>
    Array.from({ length: rows.length / size }, (_, r) => `person-${nearest(rows.subarray(r * size, (r + 1) * size), enrolled)[0] + 1}`);
  const oracle = async (images: readonly RgbImage[]): Promise<string[]> => identify(normalized(await descriptor.features(images), size));
  const labels = identify(descriptors);
  const labelled = crops.map((c, i) => ({ ...c, label: labels[i]! }));
  console.log(`  ${crops.length} faces, ${sums.length} clusters at cosine similarity ${SAME_IDENTITY}, ${enrolled.length} enrolled as identities (${MIN_FACES} faces or more)`);

  return {
    name: 'faces',
    crops: labelled,
    oracle,
    templates: [{ name: 'mobileface', extractor: await loadFeatureExtractor(zoo.mobileface!, runtime) }],
    training: { skew: 0.5, maxRows: 600 },
    skewed: { dominant: 5, skew: 0.9 },
    dispose: async () => {
      await descriptor.dispose();
    },
  };
}

function normalized(rows: Float32Array, size: number): Float32Array {
  const out = new Float32Array(rows.length);
  for (let r = 0; r < rows.length / size; r++) out.set(unitVector(rows.subarray(r * size, (r + 1) * size)), r * size);
  return out;
}

function add(sum: Float32Array, v: Float32Array): void {
  for (let i = 0; i < v.length; i++) sum[i]! += v[i]!;
}

/** Index and cosine similarity of the unit vector in `among` nearest to unit vector `v`; −1 when `among` is empty. */
function nearest(v: Float32Array, among: readonly Float32Array[]): [number, number] {
  let [best, similarity] = [-1, -Infinity];
  among.forEach((u, i) => {
    let dot = 0;
    for (let k = 0; k < v.length; k++) dot += v[k]! * u[k]!;
    if (dot > similarity) [best, similarity] = [i, dot];
  });
  return [best, similarity];
}
