import type { Session } from './squishy.js';

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
 * Only families with a profile of their own merge (`hasProfile(family.name)`): the prefix runs
 * once on the whole batch and each suffix on its slice, a cost no member's profile tells, and a
 * plan is never made from a guessed cost. Without one, the members are packed apart, as before.
 */
export function mergeSharedPrefixes(sessions: readonly Session[], families: readonly PrefixFamily[], hasProfile: (model: string) => boolean): PrefixMerge {
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
  for (const [id, group] of groups) {
    const family = familyOf.get(group[0]!.model)!;
    if (group.length < 2) continue;
    if (hasProfile(family.name)) members[id] = group;
    else notes.push(`${group.map((s) => s.id).join(', ')} share a prefix (${family.name}) but it has no profile; packed apart`);
  }
  // A merged session takes its first member's place; the others leave.
  const merged = sessions.flatMap((session): Session[] => {
    const id = groupOf(session);
    const group = id === undefined ? undefined : members[id];
    if (!group || !id) return [session];
    if (group[0] !== session) return [];
    return [{ id, model: familyOf.get(session.model)!.name, sloMs: session.sloMs, rate: group.reduce((sum, s) => sum + s.rate, 0) }];
  });
  return { sessions: merged, members, notes };
}
