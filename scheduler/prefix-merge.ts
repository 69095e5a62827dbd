import type { ProfileLookup } from './profile.js';
import { squishyBinPacking, type Packing, type PackOptions, type Session } from './squishy.js';

/**
 * Models that share a prefix (found by hashing their ONNX graphs, `groupBySharedPrefix` in
 * analyzers), run together as one prefix-batched model named `name`.
 */
export interface PrefixFamily {
  name: string;
  models: readonly string[];
}

export interface PrefixMerge {
  /** The sessions to pack: merged ones in place of their members, the rest as they were. */
  sessions: Session[];
  /** For each merged session id, the sessions it stands for (to route their requests). */
  members: Record<string, Session[]>;
  /** Families left unmerged, and why. */
  notes: string[];
}

/**
 * The epoch step of Nexus §6.3: sessions whose models share a prefix and whose SLO is the same
 * become one schedulable session of the family's prefix-batched model, at the sum of their rates.
 * Only families with a profile of their own merge: the prefix runs once on the whole batch and
 * each suffix on its slice, a cost no member's profile tells, and a plan is never made from a
 * guessed cost. A family merges only where it pays on the device the profiles were measured on:
 * its sessions packed merged must keep the GPUs less busy (Σ ℓ(b)/d over their nodes) than
 * packed apart. Otherwise the members are packed apart, and a note says why.
 */
export function mergeSharedPrefixes(sessions: readonly Session[], families: readonly PrefixFamily[], profileOf: ProfileLookup, options: PackOptions = {}): PrefixMerge {
  const familyOf = new Map(families.flatMap((family) => family.models.map((model) => [model, family] as const)));
  const groupOf = (s: Session): string | undefined => {
    const family = familyOf.get(s.model);
    return family && `${family.name}@${s.sloMs}`;
  };
  const groups = new Map<string, Session[]>();
  for (const session of sessions) {
    const id = groupOf(session);
    if (id) groups.set(id, [...(groups.get(id) ?? []), session]);
  }

  const members: Record<string, Session[]> = {};
  const notes: string[] = [];
  const mergedSession = (id: string, group: readonly Session[]): Session => ({
    id,
    model: familyOf.get(group[0]!.model)!.name,
    sloMs: group[0]!.sloMs,
    rate: group.reduce((sum, s) => sum + s.rate, 0),
  });
  for (const [id, group] of groups) {
    const family = familyOf.get(group[0]!.model)!;
    const ids = group.map((s) => s.id).join(', ');
    if (group.length < 2) continue;
    if (!hasProfile(profileOf, family.name)) {
      notes.push(`${ids} share a prefix (${family.name}) but it has no profile; packed apart`);
      continue;
    }
    const merged = busyGpus(squishyBinPacking([mergedSession(id, group)], profileOf, options), profileOf);
    const apart = group.every((s) => hasProfile(profileOf, s.model)) ? busyGpus(squishyBinPacking(group, profileOf, options), profileOf) : Infinity;
    if (merged < apart) members[id] = group;
    else notes.push(`${ids} share a prefix (${family.name}) but merging does not pay on this device: ${round(merged)} GPUs busy merged against ${round(apart)} apart; packed apart`);
  }
  // A merged session takes its first member's place; the others leave.
  const merged = sessions.flatMap((session): Session[] => {
    const id = groupOf(session);
    const group = id === undefined ? undefined : members[id];
    if (!group || !id) return [session];
    if (group[0] !== session) return [];
    return [mergedSession(id, group)];
  });
  return { sessions: merged, members, notes };
}

/** How busy a packing keeps its GPUs: Σ over nodes and their sessions of ℓ(b)/d. Unservable sessions count as infinitely busy. */
function busyGpus(packing: Packing, profileOf: ProfileLookup): number {
  if (packing.unschedulable.length > 0) return Infinity;
  return packing.nodes.reduce((sum, node) => sum + node.sessions.reduce((busy, s) => busy + profileOf(s.model).latency(s.batch) / node.dutyCycleMs, 0), 0);
}

function hasProfile(profileOf: ProfileLookup, model: string): boolean {
  try {
    profileOf(model);
    return true;
  } catch {
    return false;
  }
}

const round = (n: number): number => Math.round(n * 1000) / 1000;
