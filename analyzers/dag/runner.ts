import { describeError, ErrorCode, frameId, outputId, PanoptesError, scheduledGraph, type AppLogic, type FrameRef, type NodeOutput } from '../../core/index.js';
import { decodeJpeg, encodeJpeg, jpegImage, pixelsOf, type ImageInput, type RgbImage } from '../image/index.js';
import { cropImage } from '../models/index.js';
import { cropRegion, passesFilter, rawImage, regionOf, shiftBox, shiftOutput } from './edges.js';
import { planNodes, type PlannedNode } from './graph.js';
import { pictureEvents } from './snapshots.js';
import { budgetUpTo, evenSloSplit, stageDeadlineMs, type AppGraph, type StageBudgets } from './stage-deadlines.js';
import { DeadlineMissed, type DagOutbox, type DagRunner, type DagRunnerOptions } from './types.js';

/** One image for one node: a whole frame, or a crop of it at `offset`. */
interface Work {
  planned: PlannedNode;
  frame: FrameRef;
  /** Handed to the model as it is: a JPEG is decoded by the model's pre-processing, at the model's size. */
  image: ImageInput;
  /** The same image as pixels, for the crops of a region or of child stages (decoded already where a crop is planned). */
  pixels: () => Promise<RgbImage>;
  offset: { x: number; y: number };
  inputId: string;
  lineage: string[];
  deadlineMs: number;
  /** The node's output, made already by the ingest worker (collaborative processing). */
  localOutput?: NodeOutput;
  /** Rows wait for this: the previous frame of the batch, so operators see a source's frames in order. */
  after?: Promise<unknown>;
  /** A replay faster than real time: no deadline, and its crops travel on the backfill topics. */
  delayTolerant: boolean;
}

/**
 * Carries a frame through an app's DAG: runs each node on its input (a whole frame, a region
 * of it, a crop from the parent), turns outputs into rows with the app logic, and sends a task
 * down each edge whose filter an output passes, with the child's stage deadline. The one place
 * that knows nodes, edges, crops and fan-out; the backend around it knows messages and sessions.
 */
export function createDagRunner(options: DagRunnerOptions): DagRunner {
  let nodes = new Map<string, PlannedNode>(); // key: app/node
  let roots = new Map<string, PlannedNode[]>(); // key: app; the nodes fed by frames
  let localOutputs = 0;

  /**
   * When a node must be done with a request of a frame captured at `captureTimeMs`, its own
   * budget, and its budget up to and including it, on the app's graph as the scheduler plans it
   * (a specialized node's templates run before it). Worked out once per budgets object (a plan's
   * stay the same for an epoch), not per frame. Budgets that leave out a node of that graph (a
   * plan made before the app was seen) give way to the even split.
   */
  const stagesOf = new WeakMap<object, Map<string, { budgetMs: number; upToMs: number }>>();
  const graphs = new Map<string, { graph: AppGraph; evenSplit: StageBudgets }>();
  const graphOf = (app: AppLogic) => {
    let known = graphs.get(app.spec.name);
    if (!known) {
      const graph = { sloMs: app.spec.sloMs, ...scheduledGraph(app.spec) };
      graphs.set(app.spec.name, (known = { graph, evenSplit: evenSloSplit(graph) }));
    }
    return known;
  };
  const stageDeadline = ({ app, node }: PlannedNode, captureTimeMs: number): { deadlineMs: number; budgetMs: number; upToMs: number } => {
    const { graph, evenSplit } = graphOf(app);
    const planned = options.budgets(app.spec.name);
    const budgets = planned && graph.nodes.every((n) => planned[n.id] !== undefined) ? planned : evenSplit;
    let stages = stagesOf.get(budgets);
    if (!stages) {
      stages = new Map(app.spec.nodes.map((n) => [n.id, { budgetMs: budgets[n.id]!, upToMs: budgetUpTo(graph, budgets, n.id) }]));
      stagesOf.set(budgets, stages);
    }
    const { budgetMs, upToMs } = stages.get(node.id)!;
    return { deadlineMs: stageDeadlineMs(captureTimeMs, upToMs), budgetMs, upToMs };
  };

  const runNode = async (work: Work, out: DagOutbox): Promise<void> => {
    const { planned, frame } = work;
    const { app, node } = planned;
    const stage = `${app.spec.name}/${node.id}`;
    const what = work.lineage.length === 0 ? 'frame' : 'task';
    const at = { source: frame.source, seq: frame.seq };
    let part: ReturnType<typeof regionOf> | undefined;
    try {
      // A node with a region runs on that part of its input only (a HUD's corner).
      if (node.region) part = regionOf(await work.pixels(), work.offset, node.region);
    } catch (err) {
      return out.drop(what, 'image-decode', `${stage}: ${describeError(err)}`, at);
    }
    const { image, offset } = part ?? work;
    const pixels = part ? () => Promise.resolve(part.image) : work.pixels;
    let output: NodeOutput;
    try {
      if (work.localOutput) localOutputs += 1;
      const deadline = work.delayTolerant ? Infinity : work.deadlineMs;
      output = work.localOutput ?? (await options.infer({ app: app.spec.name, node: node.id, model: node.model }, image, planned.params, deadline, frame));
    } catch (err) {
      if (err instanceof DeadlineMissed) {
        const { upToMs } = stageDeadline(planned, frame.captureTimeMs);
        return out.drop(what, 'deadline', `stage ${stage} could not finish by its stage deadline (capture + ${Math.round(upToMs)} ms of the app's ${app.spec.sloMs} ms SLO)`, at);
      }
      // An image its pre-processing cannot decode is the input's fault, not the model's.
      const reason = err instanceof PanoptesError && err.code === ErrorCode.ImageDecode ? 'image-decode' : 'model-failed';
      return out.drop(what, reason, `${stage}: ${describeError(err)}`, at);
    }
    // Boxes from a crop are moved into frame pixels before anyone sees them.
    if (offset.x !== 0 || offset.y !== 0) output = shiftOutput(output, offset);
    // The app's operators (tracking) see a source's frames in order.
    await work.after;
    const rows = app.rowsFor({ node, frame, output, inputId: work.inputId, root: work.lineage.length === 0 });
    // Pictures of the frame's events, where the whole frame is here (not for a crop's).
    if (options.snapshots && work.lineage.length === 0) await pictureEvents(rows, work.image, options.snapshots, options.onSnapshotError ?? (() => {}));
    for (const row of rows) out.row(row);
    if (output.kind !== 'detections' || planned.children.length === 0) return;
    let whole: RgbImage;
    try {
      whole = await pixels();
    } catch (err) {
      return out.drop(what, 'image-decode', `${stage}: crops for the next stages: ${describeError(err)}`, at);
    }
    const bounds = { x1: offset.x, y1: offset.y, x2: offset.x + image.width, y2: offset.y + image.height };
    for (const child of planned.children) {
      const childNode = nodes.get(`${app.spec.name}/${child.node.id}`)!;
      const { deadlineMs, budgetMs } = stageDeadline(childNode, frame.captureTimeMs);
      let children = 0;
      for (const [i, detection] of output.detections.entries()) {
        if (!passesFilter(detection, child.edge.filter, frame)) continue;
        const region = cropRegion(detection.box, child.edge.cropPadding, bounds);
        if (region.x2 - region.x1 < 2 || region.y2 - region.y1 < 2) continue;
        children += 1;
        const crop = cropImage(whole, shiftBox(region, -offset.x, -offset.y));
        out.task(child.node.model, {
          app: app.spec.name,
          node: child.node.id,
          source: frame.source,
          frameSeq: frame.seq,
          captureTimeMs: frame.captureTimeMs,
          ...(frame.mediaTimeMs !== undefined ? { mediaTimeMs: frame.mediaTimeMs } : {}),
          deadlineMs,
          budgetMs,
          region,
          frameWidth: frame.width,
          frameHeight: frame.height,
          lineage: [...work.lineage, outputId(work.inputId, node.id, i)],
          ...(options.crops === 'pixels' ? { pixels: { width: crop.width, height: crop.height }, jpeg: crop.data } : { jpeg: await encodeJpeg(crop) }),
        }, work.delayTolerant);
      }
      options.onFanOut(app.spec.name, node.id, child.node.id, children);
    }
  };

  return {
    apps: options.apps,
    async start() {
      ({ nodes, roots } = await planNodes(options.apps, options.parseParams));
    },

    models: () => [...new Set(options.apps.flatMap((app) => app.spec.nodes.map((n) => n.model)))],

    async runFrame(frame, apps, out, after, backfill = false) {
      const delayTolerant = backfill || !options.realtime(frame.source);
      const at = { source: frame.source, seq: frame.seq };
      const planned = apps.flatMap((app) => roots.get(app) ?? []);
      if (planned.length === 0) return out.drop('frame', 'no-app', `no app analyzes source ${frame.source}`, at);
      // Decoded here when a crop will need the pixels; otherwise each model's pre-processing
      // decodes the JPEG straight to its input size (shrunk on load), and nothing else does.
      const crops = planned.some((p) => p.children.length > 0 || p.node.region);
      let image: ImageInput;
      try {
        image = crops ? await decodeJpeg(frame.jpeg) : await jpegImage(frame.jpeg);
      } catch (err) {
        return out.drop('frame', 'image-decode', describeError(err), at);
      }
      await Promise.all(
        planned.map((p) => {
          const local = frame.local?.find((l) => l.app === p.app.spec.name && l.node === p.node.id);
          return runNode({
            planned: p,
            frame,
            image,
            pixels: () => pixelsOf(image),
            offset: { x: 0, y: 0 },
            inputId: frameId(p.app.spec.name, frame.source, frame.seq),
            lineage: [],
            deadlineMs: stageDeadline(p, frame.captureTimeMs).deadlineMs,
            after,
            delayTolerant,
            ...(local ? { localOutput: { kind: 'detections', detections: local.detections, ...(local.model !== p.node.model ? { servedBy: local.model } : {}) } } : {}),
          }, out);
        }),
      );
    },

    async runTask(task, out, backfill = false) {
      const at = { source: task.source, seq: task.frameSeq };
      const planned = nodes.get(`${task.app}/${task.node}`);
      if (!planned) return out.drop('task', 'unknown-node', `no node ${task.node} in app ${task.app} here`, at);
      let image: RgbImage;
      try {
        image = task.pixels ? rawImage(task.pixels, task.jpeg) : await decodeJpeg(task.jpeg);
      } catch (err) {
        return out.drop('task', 'image-decode', describeError(err), at);
      }
      const frame: FrameRef = {
        source: task.source,
        seq: task.frameSeq,
        captureTimeMs: task.captureTimeMs,
        ...(task.mediaTimeMs !== undefined ? { mediaTimeMs: task.mediaTimeMs } : {}),
        width: task.frameWidth ?? image.width,
        height: task.frameHeight ?? image.height,
      };
      await runNode({
        planned,
        frame,
        image,
        pixels: () => Promise.resolve(image),
        offset: { x: task.region?.x1 ?? 0, y: task.region?.y1 ?? 0 },
        inputId: task.lineage.at(-1) ?? frameId(task.app, task.source, task.frameSeq),
        lineage: task.lineage,
        deadlineMs: task.deadlineMs,
        delayTolerant: backfill || !options.realtime(task.source),
      }, out);
    },

    localOutputs: () => localOutputs,
  };
}
