import { digest, type GraphHashes } from './graph-hash.js';

/** A tensor the shared prefix computes and the rest of some model reads (or outputs). */
export interface CutTensor {
  /** Its structural hash: the same value in every model. */
  readonly hash: string;
  /** Per model, in the order given: the names that hold this value there (usually one). */
  readonly names: readonly (readonly string[])[];
}

export interface SharedPrefix {
  /** Names the prefix by its nodes' hashes: equal for every set of models sharing exactly this prefix. */
  readonly key: string;
  /** Per model, in the order given: the indices (into `graph.node`) of its nodes in the prefix. */
  readonly nodes: readonly (readonly number[])[];
  /**
   * Where the prefix ends: its tensors that any model's remaining nodes read or that are model
   * outputs. Constants (tensors that depend on no graph input) are left out: they carry no
   * batch to split, and each suffix recomputes the ones it needs.
   */
  readonly cut: readonly CutTensor[];
  /** Bytes of the weights the prefix nodes use: initializers and attribute tensors. */
  readonly parameterBytes: number;
}

/**
 * The longest prefix the models share: every node whose hash occurs in all of them. A node's hash
 * covers everything upstream of it, so a shared node's whole upstream is shared too. With one
 * model, the prefix is the whole model.
 */
export function sharedPrefix(models: readonly GraphHashes[]): SharedPrefix {
  const [first, ...others] = models;
  if (!first) throw new RangeError('sharedPrefix: models must not be empty');
  const otherHashes = others.map((m) => new Set(m.nodes.map((n) => n.hash)));
  const shared = new Set(first.nodes.map((n) => n.hash).filter((hash) => otherHashes.every((hashes) => hashes.has(hash))));
  const members = models.map((model) => {
    const nodes = model.nodes.filter((n) => shared.has(n.hash));
    const writes = nodes.filter((n) => n.dependsOnInputs).flatMap((n) => n.writes);
    const readAfter = new Set([...model.nodes.filter((n) => !shared.has(n.hash)).flatMap((n) => n.reads), ...model.outputs]);
    return { model, nodes, writes, readAfter };
  });

  const cutHashes = new Set(
    members.flatMap(({ model, writes, readAfter }) => writes.filter((name) => readAfter.has(name)).flatMap((name) => model.tensors.get(name) ?? [])),
  );
  const cut = [...cutHashes].map((hash) => ({
    hash,
    names: members.map(({ model, writes }) => writes.filter((name) => model.tensors.get(name) === hash)),
  }));

  const firstNodes = first.nodes.filter((n) => shared.has(n.hash));
  const weights = new Set(firstNodes.flatMap((n) => n.reads).filter((name) => first.initializerBytes.has(name)));
  const parameterBytes =
    [...weights].reduce((sum, name) => sum + (first.initializerBytes.get(name) ?? 0), 0) +
    firstNodes.reduce((sum, n) => sum + n.attributeBytes, 0);

  return {
    key: digest('prefix', ...[...shared].sort()),
    nodes: members.map(({ nodes }) => nodes.map((n) => n.index)),
    cut,
    parameterBytes,
  };
}

export interface PrefixGroup<Id> {
  readonly members: readonly Id[];
  /** What all members share; `prefix.nodes` and `prefix.cut` list the members in order. */
  readonly prefix: SharedPrefix;
}

export interface PrefixGroupOptions {
  /**
   * A model joins a group only if it would share at least this many bytes of weights with all of
   * the group's members. A prefix without weights (an input transpose) is not worth merging.
   * @defaultValue 1
   */
  minParameterBytes?: number;
}

/**
 * Groups models that share a prefix, so that the sessions of one group (with one SLO) can merge
 * into one prefix-batched session. Greedy, in the map's order: each model joins the group it
 * shares the most weight bytes with, or starts a group. Groups with the same prefix have the
 * same `prefix.key`.
 */
export function groupBySharedPrefix<Id>(models: ReadonlyMap<Id, GraphHashes>, options: PrefixGroupOptions = {}): PrefixGroup<Id>[] {
  const minParameterBytes = options.minParameterBytes ?? 1;
  const groups: { members: Id[]; graphs: GraphHashes[]; prefix: SharedPrefix }[] = [];
  for (const [id, graph] of models) {
    let best: { group: (typeof groups)[number]; prefix: SharedPrefix } | undefined;
    for (const group of groups) {
      const prefix = sharedPrefix([...group.graphs, graph]);
      if (prefix.parameterBytes >= minParameterBytes && prefix.parameterBytes > (best?.prefix.parameterBytes ?? -1)) best = { group, prefix };
    }
    if (best) {
      best.group.members.push(id);
      best.group.graphs.push(graph);
      best.group.prefix = best.prefix;
    } else {
      groups.push({ members: [id], graphs: [graph], prefix: sharedPrefix([graph]) });
    }
  }
  return groups.map(({ members, prefix }) => ({ members, prefix }));
}
