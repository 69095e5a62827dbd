import type { ProfileLookup } from './profile.js';
import { admitSessions, type GpuNode, type NodeSession, type Packing, type PackOptions, type Session } from './squishy.js';
import { EPSILON } from './worst-case.js';

/**
 * The batch-oblivious scheduler Nexus compares squishy bin packing with (§7.2, Fig. 16): each
 * session gets a share of the cluster proportional to its rate and inversely proportional to its
 * peak single-GPU throughput, w = R/T, allocated greedily. It treats a fraction f of a GPU as
 * f·T requests/s, which is exactly what batching breaks: a session sharing a GPU waits for the
 * others' batches, so its batch B no longer meets the SLO. The plan is not checked against the
 * SLOs; finding out how it fares is the simulator's job.
 *
 * Greedy: sessions by share, largest first, take their whole GPUs (alone, at batch B, like
 * SCHEDULESATURATE); the fractions then fill the remaining GPUs in that order, a fraction split
 * over two GPUs when it does not fit in what is left of one. Each piece serves the session's
 * rate in proportion to its size, at batch B; a shared GPU's duty cycle is Σℓ(B) of its
 * sessions, what one round of full batches takes.
 */
export function batchObliviousAllocation(
  sessions: readonly Session[],
  profileOf: ProfileLookup,
  options: PackOptions & {
    /** GPUs to share out; the Nexus experiments fix the cluster (8 GPUs in Fig. 16). @defaultValue ⌈ΣR/T⌉ */
    gpus?: number;
  } = {},
): Packing {
  const { servable, unschedulable } = admitSessions(sessions, profileOf, options.deviceMemoryMB ?? Infinity);
  const weight = (s: (typeof servable)[number]): number => s.session.rate / s.peak.throughput;
  const total = servable.reduce((sum, s) => sum + weight(s), 0);
  const gpus = options.gpus ?? Math.ceil(total - EPSILON);
  const shares = servable
    .map((s) => ({ s, share: total > 0 ? (gpus * weight(s)) / total : 0 }))
    .filter(({ share }) => share > 0)
    .sort((a, b) => b.share - a.share);

  const nodes: Omit<GpuNode, 'id'>[] = [];
  const piece = (s: (typeof servable)[number], share: number, fraction: number): NodeSession => ({
    id: s.session.id,
    model: s.session.model,
    sloMs: s.session.sloMs,
    rate: (s.session.rate * fraction) / share,
    batch: s.peak.batch,
  });
  for (const { s, share } of shares) {
    for (let i = 1; i <= Math.floor(share + EPSILON); i++) {
      nodes.push({ dedicated: true, dutyCycleMs: s.profile.latency(s.peak.batch), sessions: [piece(s, share, 1)] });
    }
  }
  let open: { sessions: NodeSession[]; free: number; cycleMs: number } | undefined;
  const close = (): void => {
    if (open) nodes.push({ dedicated: false, dutyCycleMs: open.cycleMs, sessions: open.sessions });
    open = undefined;
  };
  for (const { s, share } of shares) {
    let rest = share - Math.floor(share + EPSILON);
    while (rest > EPSILON) {
      open ??= { sessions: [], free: 1, cycleMs: 0 };
      const taken = Math.min(rest, open.free);
      open.sessions.push(piece(s, share, taken));
      open.cycleMs += s.profile.latency(s.peak.batch);
      open.free -= taken;
      rest -= taken;
      if (open.free <= EPSILON) close();
    }
  }
  close();
  return { nodes: nodes.map((node, i) => ({ ...node, id: `gpu-${i}` })), unschedulable };
}
