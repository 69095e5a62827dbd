import type { ProfileLookup } from './profile.js';
import type { Packing, PackOptions, Session } from './squishy.js';
import { EPSILON, gpuBudgetMs, peakThroughput } from './worst-case.js';

/**
 * Everything a valid schedule must satisfy (Nexus §6.1 and its ILP), checked on plain data:
 * per node Σℓ(b) ≤ d, d + ℓ(b) ≤ SLO (less pre/post-processing) for each session, b ≥ rate·d,
 * integer batches within the profile, memory within the device, 2ℓ(B) ≤ SLO on dedicated nodes;
 * per session, the nodes' rates add up to its rate, or it is unschedulable for a reason that
 * holds. Returns one line per violation; an empty list is a valid plan.
 */
export function planViolations(
  packing: Packing,
  sessions: readonly Session[],
  profileOf: ProfileLookup,
  options: PackOptions = {},
): string[] {
  const memoryMB = options.deviceMemoryMB ?? Infinity;
  const sessionOf = new Map(sessions.map((s) => [s.id, s]));
  const served = new Map<string, number>();
  const problems: string[] = [];
  for (const node of packing.nodes) {
    const d = node.dutyCycleMs;
    const where = `node ${node.id}`;
    let busyMs = 0;
    let usedMB = 0;
    if (node.sessions.length === 0) problems.push(`${where} has no session`);
    if (new Set(node.sessions.map((s) => s.id)).size !== node.sessions.length) problems.push(`${where} holds a session twice`);
    if (node.dedicated && node.sessions.length !== 1) problems.push(`${where} is dedicated but holds ${node.sessions.length} sessions`);
    for (const s of node.sessions) {
      const session = sessionOf.get(s.id);
      if (!session || session.model !== s.model || session.sloMs !== s.sloMs) {
        problems.push(`${where}: session ${s.id} (${s.model}, ${s.sloMs} ms) is not one of the input sessions`);
        continue;
      }
      const profile = profileOf(s.model);
      const budget = gpuBudgetMs(profile, s.sloMs);
      const latency = profile.latency(s.batch);
      busyMs += latency;
      usedMB += profile.memoryMB(s.batch);
      served.set(s.id, (served.get(s.id) ?? 0) + s.rate);
      if (!Number.isInteger(s.batch) || s.batch < 1 || s.batch > profile.maxBatch) {
        problems.push(`${where}: ${s.id} batch ${s.batch} is not an integer in 1..${profile.maxBatch}`);
      }
      if (d + latency > budget + EPSILON) problems.push(`${where}: ${s.id} worst case d + ℓ(b) = ${d + latency} ms > ${budget} ms`);
      if (node.dedicated && 2 * latency > budget + EPSILON) problems.push(`${where}: ${s.id} 2ℓ(B) = ${2 * latency} ms > ${budget} ms`);
      if (s.batch < (s.rate * d) / 1000 - EPSILON) problems.push(`${where}: ${s.id} batch ${s.batch} < rate·d = ${(s.rate * d) / 1000}`);
      if (!(s.rate > 0)) problems.push(`${where}: ${s.id} serves rate ${s.rate}`);
    }
    if (busyMs > d + EPSILON) problems.push(`${where}: Σℓ(b) = ${busyMs} ms > duty cycle ${d} ms`);
    if (usedMB > memoryMB + EPSILON) problems.push(`${where}: memory ${usedMB} MB > ${memoryMB} MB`);
  }
  const unschedulable = new Set(packing.unschedulable.map((u) => u.id));
  for (const session of sessions) {
    const rate = served.get(session.id) ?? 0;
    if (unschedulable.has(session.id)) {
      if (rate > 0) problems.push(`session ${session.id} is unschedulable but placed`);
      if (peakThroughput(profileOf(session.model), session.sloMs, memoryMB)) problems.push(`session ${session.id} is unschedulable but a batch meets its SLO`);
    } else if (Math.abs(rate - session.rate) > 1e-9 * Math.max(1, session.rate)) {
      problems.push(`session ${session.id} served ${rate} of ${session.rate} requests/s`);
    }
  }
  return problems;
}
