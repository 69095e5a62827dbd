import type { ProfileLookup } from './profile.js';
import {
  admitSessions,
  bestFit,
  dedicatedResidualNode,
  fitsInOneCycle,
  mergeNodes,
  scheduleResidue,
  scheduleSaturate,
  singleNode,
  toGpuNode,
  type GpuNode,
  type PackedNode,
  type Packing,
  type PackOptions,
  type Residual,
  type Servable,
  type Session,
} from './squishy.js';

/**
 * Incremental squishy bin packing across epochs (Nexus §6.1, last paragraph): start from the
 * previous epoch's nodes and move as few models as the new rates allow.
 *
 * 1. A session keeps as many of its dedicated GPUs as it still needs; new ones are added.
 * 2. Each shared node keeps its sessions while they still fit together (MERGENODES' checks at the
 *    new rates). An overloaded node evicts its cheapest sessions, the lowest occupancy first.
 * 3. Evicted and new residuals are packed best-fit into the kept nodes, then into new ones.
 * 4. When the overall load fell, the least-utilized shared nodes try to hand all their sessions
 *    to other nodes; a node left empty is released.
 * A node the plan keeps keeps its id; `countModelMoves` compares two plans.
 */
export function repack(previous: readonly GpuNode[], sessions: readonly Session[], profileOf: ProfileLookup, options: PackOptions = {}): Packing {
  const memoryMB = options.deviceMemoryMB ?? Infinity;
  const { servable, unschedulable } = admitSessions(sessions, profileOf, memoryMB);
  const { dedicated, residuals } = scheduleSaturate(servable, memoryMB, options.maxNodes);
  const residualOf = new Map(residuals.map((r) => [r.session.id, r]));
  const servableOf = new Map(servable.map((s) => [s.session.id, s]));
  const stays = (previousSession: Session): Servable | undefined => {
    const now = servableOf.get(previousSession.id);
    return now?.session.model === previousSession.model ? now : undefined;
  };

  // 1. Dedicated GPUs: reuse the session's previous ones first.
  const previousDedicated = groupBy(
    previous.filter((n) => n.dedicated && n.sessions.length === 1 && stays(n.sessions[0] as Session)),
    (n) => (n.sessions[0] as Session).id,
  );
  const guarded = residuals.filter((r) => !fitsInOneCycle(r)).map(dedicatedResidualNode);
  const dedicatedNodes = [...dedicated, ...guarded].map((node) => {
    const id = previousDedicated.get((node.sessions[0] as Session).id)?.shift()?.id;
    return { ...node, id };
  });

  // 2. Shared nodes keep what still fits.
  const placed = new Set<string>();
  const shared: { id: string | undefined; node: PackedNode }[] = [];
  const evicted: Residual[] = [];
  for (const before of previous.filter((n) => !n.dedicated)) {
    const members = before.sessions
      .map((s) => (stays(s) ? residualOf.get(s.id) : undefined))
      .filter((r): r is Residual => r !== undefined && fitsInOneCycle(r) && !placed.has(r.session.id))
      .sort((a, b) => b.occupancy - a.occupancy);
    let node: PackedNode | undefined;
    for (const residual of members) {
      placed.add(residual.session.id);
      const merged = node ? mergeNodes(node, singleNode(residual), memoryMB) : singleNode(residual);
      if (merged) node = merged;
      else evicted.push(residual);
    }
    if (node) shared.push({ id: before.id, node });
  }

  // An evicted or new residual may take over a GPU its session no longer needs whole.
  const unplaced = residuals.filter((r) => fitsInOneCycle(r) && !placed.has(r.session.id));
  const newcomers: Residual[] = [];
  for (const residual of [...evicted, ...unplaced]) {
    const spare = previousDedicated.get(residual.session.id)?.shift();
    if (spare) shared.push({ id: spare.id, node: singleNode(residual) });
    else newcomers.push(residual);
  }

  // 3. Pack evicted and new residuals; scheduleResidue keeps indexes, so ids stay aligned.
  const nodes = scheduleResidue(newcomers, memoryMB, shared.map((s) => s.node));
  let packed = nodes.map((node, i) => ({ id: shared[i]?.id, node }));

  // 4. Consolidate when the load fell.
  if (loadFell(previous, servable)) packed = consolidate(packed, memoryMB);

  const all = [...dedicatedNodes, ...packed.map(({ id, node }) => ({ ...toGpuNode(node), id }))];
  const used = new Set(all.map((n) => n.id).filter((id) => id !== undefined));
  const fresh = freshIds(used);
  return { nodes: all.map((n) => ({ ...n, id: n.id ?? fresh() })), unschedulable };
}

/**
 * Model moves from one plan to the next: a model loaded on a node (by id) that did not hold it
 * before. Loading weights is what a move costs; unloading and batch changes are free.
 */
export function countModelMoves(previous: readonly GpuNode[], next: readonly GpuNode[]): number {
  const held = new Set(previous.flatMap((n) => n.sessions.map((s) => `${n.id}\u0000${s.model}`)));
  const loaded = new Set(next.flatMap((n) => n.sessions.map((s) => `${n.id}\u0000${s.model}`)));
  return [...loaded].filter((key) => !held.has(key)).length;
}

/** The load in GPUs at peak throughput, ΣR/T, now against the previous plan's rates; a session that left is a fall. */
function loadFell(previous: readonly GpuNode[], servable: readonly Servable[]): boolean {
  const byId = new Map(servable.map((s) => [s.session.id, s]));
  let before = 0;
  for (const s of previous.flatMap((n) => n.sessions)) {
    const now = byId.get(s.id);
    if (!now) return true;
    before += s.rate / now.peak.throughput;
  }
  const after = servable.reduce((sum, s) => sum + s.session.rate / s.peak.throughput, 0);
  return after < before * (1 - 1e-9); // the previous rates add up to R only within float noise
}

/**
 * Nexus: "move sessions from the least utilized backends to other backends". A node is emptied
 * only when all its sessions fit elsewhere; moving some of them would cost moves and save nothing.
 */
function consolidate(
  packed: { id: string | undefined; node: PackedNode }[],
  memoryMB: number,
): { id: string | undefined; node: PackedNode }[] {
  let nodes = [...packed];
  for (let released = true; released; ) {
    released = false;
    for (const candidate of [...nodes].sort((a, b) => a.node.occupancy - b.node.occupancy)) {
      const others = nodes.filter((n) => n !== candidate).map((n) => ({ ...n }));
      const fitsElsewhere = candidate.node.members.every(({ residual }) => {
        const single = singleNode(residual);
        const index = bestFit(others.map((o) => o.node), single, memoryMB);
        const slot = index === undefined ? undefined : others[index];
        const merged = slot && mergeNodes(slot.node, single, memoryMB);
        if (slot && merged) slot.node = merged;
        return merged !== undefined;
      });
      if (fitsElsewhere) {
        nodes = others;
        released = true;
        break;
      }
    }
  }
  return nodes;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

function freshIds(used: Set<string>): () => string {
  let next = 0;
  return () => {
    while (used.has(`gpu-${next}`)) next++;
    const id = `gpu-${next}`;
    used.add(id);
    return id;
  };
}
