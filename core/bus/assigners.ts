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
