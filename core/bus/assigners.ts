/**
 * Partition assigners shared by both bus adapters (the memory bus calls them directly, the Kafka
 * adapter wraps them in kafkajs's assigner protocol), so a group splits its partitions the same
 * way whichever bus is underneath.
 */
import { ErrorCode, PanoptesError } from '../errors.js';
import type { GroupMember, PartitionAssigner, TopicPartition } from './types.js';

/**
 * Deals the partitions out one by one, like Kafka's RoundRobinAssignor. Members are sorted by id
 * and partitions by (topic, partition) first, so the result does not depend on the order in
 * which members joined or topics were listed.
 */
export const roundRobinAssigner: PartitionAssigner = {
  name: 'roundrobin',
  assign({ members, partitions }) {
    const memberIds = members.map((member) => member.memberId).sort();
    const assignment = new Map<string, TopicPartition[]>(memberIds.map((id) => [id, []]));
    if (memberIds.length === 0) return assignment;
    [...partitions].sort(compareTopicPartitions).forEach((tp, index) => {
      const memberId = memberIds[index % memberIds.length] as string;
      assignment.get(memberId)?.push({ topic: tp.topic, partition: tp.partition });
    });
    return assignment;
  },
};

export function compareTopicPartitions(a: TopicPartition, b: TopicPartition): number {
  if (a.topic !== b.topic) return a.topic < b.topic ? -1 : 1;
  return a.partition - b.partition;
}

/**
 * Throws `BusInvalidArgument` unless the assigner gave every partition to exactly one of the
 * members it was offered. A broken custom assigner must fail loudly: a partition given to nobody
 * stalls its streams, one given twice breaks per-key order.
 */
export function checkAssignment(
  assigner: PartitionAssigner,
  input: { members: readonly GroupMember[]; partitions: readonly TopicPartition[] },
  assignment: Map<string, TopicPartition[]>,
): void {
  const fail = (problem: string, details: Record<string, unknown>): never => {
    throw new PanoptesError(
      ErrorCode.BusInvalidArgument,
      `partition assigner "${assigner.name}" ${problem}`,
      { details: { assigner: assigner.name, ...details } },
    );
  };
  const memberIds = new Set(input.members.map((member) => member.memberId));
  const expected = new Set(input.partitions.map(topicPartitionKey));
  const seen = new Set<string>();
  for (const [memberId, partitions] of assignment) {
    if (!memberIds.has(memberId)) fail('assigned partitions to an unknown member', { memberId });
    for (const tp of partitions) {
      const key = topicPartitionKey(tp);
      if (!expected.has(key)) fail('assigned a partition it was not given', { ...tp });
      if (seen.has(key)) fail('assigned a partition twice', { ...tp });
      seen.add(key);
    }
  }
  const missing = input.partitions.filter((tp) => !seen.has(topicPartitionKey(tp)));
  if (missing.length > 0) fail('left partitions unassigned', { missing });
}

/** A map key for a partition. Kafka topic names cannot contain ':', so it is unambiguous. */
export function topicPartitionKey(tp: TopicPartition): string {
  return `${tp.topic}:${tp.partition}`;
}

/** Per member key (e.g. a backend id), the share of a topic's partitions it should consume. */
export type RoutingWeights = Readonly<Record<string, number>>;

/**
 * Follows the scheduler's routing table (DESIGN.md "Routing on Kafka"): each topic's partitions
 * go to the members in proportion to the weight the plan gives the key a member announces in its
 * metadata (`metadata[memberKey]`, the backend id by default). Shares are rounded by largest
 * remainder, ties to the smaller member id, so the split is as close to the weights as whole
 * partitions allow and the same on every run. A member the plan does not weigh gets nothing;
 * a topic without weights, or whose weighted backends are all absent (a backend died, the plan
 * has not caught up yet), is dealt round-robin, so no partition is ever left without a consumer.
 */
export function routingAssigner(weightsFor: (topic: string) => RoutingWeights | undefined, memberKey = 'backend'): PartitionAssigner {
  return {
    name: 'panoptes-routing',
    assign({ members, partitions }) {
      const assignment = new Map<string, TopicPartition[]>(members.map((m) => [m.memberId, []]));
      const memberIds = members.map((m) => m.memberId).sort();
      const byTopic = new Map<string, TopicPartition[]>();
      for (const tp of [...partitions].sort(compareTopicPartitions)) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp]);
      let dealt = 0; // round-robin goes on across topics, so the first members get no extra on each

      for (const [topic, topicPartitions] of byTopic) {
        const weights = weightsFor(topic) ?? {};
        const weighted = members
          .map((m) => ({ memberId: m.memberId, weight: weights[m.metadata[memberKey] ?? ''] ?? 0 }))
          .filter((m) => Number.isFinite(m.weight) && m.weight > 0)
          .sort((a, b) => (a.memberId < b.memberId ? -1 : 1));
        if (weighted.length === 0) {
          for (const tp of topicPartitions) assignment.get(memberIds[dealt++ % memberIds.length]!)?.push(tp);
          continue;
        }
        const shares = largestRemainder(weighted, topicPartitions.length);
        let next = 0;
        for (const { memberId, count } of shares) {
          assignment.get(memberId)?.push(...topicPartitions.slice(next, next + count));
          next += count;
        }
      }
      return assignment;
    },
  };
}

/** Splits `total` whole items in proportion to the weights (Hamilton's method). */
function largestRemainder(members: { memberId: string; weight: number }[], total: number): { memberId: string; count: number }[] {
  // Scaled by the largest first, so huge weights cannot overflow the sum.
  const largest = Math.max(...members.map((m) => m.weight));
  const sum = members.reduce((s, m) => s + m.weight / largest, 0);
  const exact = members.map((m) => ({ memberId: m.memberId, quota: (m.weight / largest / sum) * total }));
  const shares = exact.map((e) => ({ memberId: e.memberId, count: Math.floor(e.quota), remainder: e.quota - Math.floor(e.quota) }));
  let left = total - shares.reduce((s, m) => s + m.count, 0);
  for (const share of [...shares].sort((a, b) => b.remainder - a.remainder || (a.memberId < b.memberId ? -1 : 1))) {
    if (left-- <= 0) break;
    share.count += 1;
  }
  return shares.map(({ memberId, count }) => ({ memberId, count }));
}
