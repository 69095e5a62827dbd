import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, PanoptesError, type NodeOutput, type ResolvedModel } from '../../core/index.js';
import type { ImageInput } from '../image/index.js';
import { groupBySharedPrefix, hashGraph, loadMergedPrefixBatch, mergePrefixBatch, readOnnxModel, sharedPrefix, splitAtSharedPrefix, type PrefixBatchedModel } from '../onnx/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors } from '../runtime/index.js';
import { phasedRunner, type Executed, type ModelRunner, type Prepared } from './runner.js';

/**
 * Prefix families (Nexus §6.3) as a backend runs them. Zoo models whose ONNX graphs share a
 * prefix (same architecture and input, found by hashing the graphs) form a family; its runner
 * takes requests for any member, runs each member's own pre-processing, the shared prefix once
 * on the union of the batch, each member's suffix on its rows, and each member's own decoding.
 * The scheduler sees the family as one model with a profile of its own (`panoptes profile`).
 */

/** Architectures whose runners make one fixed-size model run per batch, so members' rows stack. */
const FAMILY_ARCHITECTURES = new Set(['centernet', 'blazeface', 'faceres', 'facemesh']);

/**
 * A family's parameters for one request: the member it is for and that member's parsed params;
 * or, from the family's own `parseParams` (warm-up, profiling), params for every member, the
 * request then going to member i mod n by its place in the batch, so a batch spreads evenly.
 */
export type FamilyParams = { member: string; params: unknown } | { perMember: readonly unknown[] };

/** The zoo entry of a family: its first member's, named after all members, with `family` listing them. */
function familyModel(members: readonly ResolvedModel[]): ResolvedModel {
  const [first] = members;
  if (!first || members.length < 2) throw new RangeError('familyModel: a family has at least two members');
  return {
    ...first,
    name: members.map((m) => m.name).join('+'),
    maxBatch: Math.min(...members.map((m) => m.maxBatch)),
    description: `prefix family of ${members.map((m) => m.name).join(', ')}`,
    family: members,
  };
}

/**
 * The families among `models`: members of one architecture and input size whose graphs share a
 * prefix holding at least `minSharedFraction` of the smallest member's weights.
 */
export async function findPrefixFamilies(models: readonly ResolvedModel[], minSharedFraction = 0.5): Promise<ResolvedModel[]> {
  const kinds = new Map<string, ResolvedModel[]>();
  for (const model of models) {
    if (!FAMILY_ARCHITECTURES.has(model.architecture) || model.family) continue;
    const kind = `${model.architecture}/${model.inputSize ?? ''}`;
    kinds.set(kind, [...(kinds.get(kind) ?? []), model]);
  }
  const families: ResolvedModel[] = [];
  for (const kind of kinds.values()) {
    if (kind.length < 2) continue;
    const graphs = new Map(await Promise.all(kind.map(async (m) => [m.name, hashGraph(await readOnnxModel(m.file))] as const)));
    // A single graph's "shared prefix" is all of it: its weight bytes.
    const weights = Math.min(...[...graphs.values()].map((g) => sharedPrefix([g]).parameterBytes));
    for (const group of groupBySharedPrefix(graphs, { minParameterBytes: Math.max(1, minSharedFraction * weights) })) {
      // A member that is all prefix is the same network as another: nothing of its own to run.
      const ownNodes = group.members.every((name, i) => (group.prefix.nodes[i]?.length ?? 0) < graphs.get(name)!.nodes.length);
      if (group.members.length > 1 && ownNodes) families.push(familyModel(group.members.map((name) => kind.find((m) => m.name === name)!)));
    }
  }
  return families;
}

interface FamilyPrepared extends Prepared {
  /** Per member with requests in the batch: its prepared rows and where they sit in the batch. */
  parts: { member: number; prepared: Prepared; indices: number[] }[];
}
interface FamilyExecuted extends Executed {
  parts: { member: number; executed: Executed; indices: number[] }[];
}

/**
 * Loads a family (`spec.family`): splits the members at their shared prefix and merges prefix and
 * suffixes into one graph (written to a scratch directory, loaded as one session), and loads each
 * member's runner over a runtime whose model run hands its feeds to the family's shared run.
 * `loadMember` is the zoo's loader.
 */
export async function loadFamilyRunner(
  spec: ResolvedModel,
  runtime: ModelRuntime,
  loadMember: (spec: ResolvedModel, runtime: ModelRuntime) => Promise<ModelRunner>,
): Promise<ModelRunner<FamilyParams>> {
  const members = spec.family ?? [];
  const dir = await mkdtemp(join(tmpdir(), 'panoptes-family-'));
  let batched: PrefixBatchedModel | undefined;
  const runners: ModelRunner[] = [];
  const release = async (): Promise<void> => {
    await Promise.all(runners.map((r) => r.dispose()));
    await batched?.dispose();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const split = splitAtSharedPrefix(await Promise.all(members.map((m) => readOnnxModel(m.file))));
    batched = await loadMergedPrefixBatch(runtime, spec.name, mergePrefixBatch(split), dir);
    const rounds = sharedRuns(batched);
    for (const [i, member] of members.entries()) runners.push(await loadMember(member, memberRuntime(runtime, member.name, batched, i, rounds)));
    return familyRunner(spec, runners, rounds, release);
  } catch (err) {
    await release();
    throw err;
  }
}

function familyRunner(spec: ResolvedModel, runners: readonly ModelRunner[], rounds: SharedRuns, dispose: () => Promise<void>): ModelRunner<FamilyParams> {
  const memberOf = new Map((spec.family ?? []).map((m, i) => [m.name, i]));
  return phasedRunner<FamilyParams, FamilyPrepared, FamilyExecuted>({
    spec,
    parseParams: (params) => ({ perMember: runners.map((r) => r.parseParams(params)) }),
    async prepare(images: readonly ImageInput[], params: readonly FamilyParams[]) {
      const groups = new Map<number, { indices: number[]; params: unknown[] }>();
      params.forEach((p, i) => {
        const member = 'member' in p ? memberOf.get(p.member) : i % runners.length;
        if (member === undefined) throw new PanoptesError(ErrorCode.ModelRun, `${spec.name}: ${'member' in p ? p.member : '?'} is not a member of this family`);
        const group = groups.get(member) ?? { indices: [], params: [] };
        group.indices.push(i);
        group.params.push('member' in p ? p.params : p.perMember[member]);
        groups.set(member, group);
      });
      const parts = await Promise.all(
        [...groups].sort(([a], [b]) => a - b).map(async ([member, { indices, params: own }]) => ({
          member,
          indices,
          prepared: await runners[member]!.prepare(indices.map((i) => images[i]!), own),
        })),
      );
      return { size: images.length, parts };
    },
    async execute(prepared) {
      const executed = await rounds.run(prepared.parts.map((p) => p.member), (member) => runners[member]!.execute(prepared.parts.find((p) => p.member === member)!.prepared));
      return { size: prepared.size, parts: prepared.parts.map((p, k) => ({ member: p.member, indices: p.indices, executed: executed[k]! })) };
    },
    async finish(executed) {
      const outputs = new Array<NodeOutput>(executed.size);
      const finished = await Promise.all(executed.parts.map(async (part) => runners[part.member]!.finish(part.executed)));
      executed.parts.forEach((part, p) => finished[p]!.forEach((output, k) => (outputs[part.indices[k]!] = output)));
      return outputs;
    },
    dispose,
  });
}

/**
 * One shared run at a time: the members with rows in a batch each call their model's `run`
 * (through `memberRuntime`), and when all of them have, the prefix runs once on the union and
 * each suffix on its rows. A member that fails before its run fails the whole batch.
 */
interface SharedRuns {
  run<T>(members: readonly number[], execute: (member: number) => Promise<T>): Promise<T[]>;
  /** A member's model run, called from within `execute`. */
  feed(member: number, feeds: NamedTensors): Promise<NamedTensors>;
}

function sharedRuns(batched: PrefixBatchedModel): SharedRuns {
  let queue: Promise<unknown> = Promise.resolve();
  let round: { expected: Set<number>; feeds: Map<number, NamedTensors>; settle: { resolve: (o: NamedTensors[]) => void; reject: (err: unknown) => void }; outputs: Promise<NamedTensors[]> } | undefined;

  const fire = (): void => {
    const { feeds, settle } = round!;
    batched.run(batched.outputNames.map((_, member) => feeds.get(member) ?? {})).then(settle.resolve, settle.reject);
  };

  return {
    run<T>(members: readonly number[], execute: (member: number) => Promise<T>): Promise<T[]> {
      const turn = queue.then(async () => {
        let settle!: { resolve: (o: NamedTensors[]) => void; reject: (err: unknown) => void };
        const outputs = new Promise<NamedTensors[]>((resolve, reject) => (settle = { resolve, reject }));
        outputs.catch(() => {});
        round = { expected: new Set(members), feeds: new Map(), settle, outputs };
        // Every member settles before the next batch's round begins; the first failure fails the batch.
        const settled = await Promise.allSettled(
          members.map((member) =>
            execute(member).catch((err: unknown) => {
              settle.reject(err);
              throw err;
            }),
          ),
        );
        round = undefined;
        const failed = settled.find((r) => r.status === 'rejected');
        if (failed) throw failed.reason;
        return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
      });
      queue = turn.catch(() => {});
      return turn;
    },
    async feed(member, feeds) {
      if (!round || !round.expected.has(member) || round.feeds.has(member)) {
        throw new PanoptesError(ErrorCode.ModelRun, `${batched.name}: member ${member} ran outside its family's batch, or twice in one`);
      }
      round.feeds.set(member, feeds);
      const { outputs } = round;
      if (round.feeds.size === round.expected.size) fire();
      return (await outputs)[member]!;
    },
  };
}

/** The runtime a member's runner is loaded with: its model is the family's suffix for it, run as part of the shared run. */
function memberRuntime(runtime: ModelRuntime, name: string, batched: PrefixBatchedModel, member: number, rounds: SharedRuns): ModelRuntime {
  const model: LoadedModel = {
    name,
    inputNames: batched.inputNames,
    outputNames: batched.outputNames[member]!,
    run: (feeds) => rounds.feed(member, feeds),
    dispose: async () => {},
  };
  return { name: runtime.name, lanes: runtime.lanes, load: async () => model, close: async () => {} };
}
