/**
 * Our `PartitionAssigner` in kafkajs's group protocol. The group leader runs `assign`; the
 * members' metadata (e.g. their backend id) travels as JSON in the protocol's userData, so a
 * plan-following assigner sees the same members on Kafka as on the memory bus.
 */
import { AssignerProtocol, type PartitionAssigner as KafkaAssigner } from 'kafkajs';
import { checkAssignment } from '../assigners.js';
import type { GroupMember, PartitionAssigner, TopicPartition } from '../types.js';

const PROTOCOL_VERSION = 1;

export function toKafkaAssigner(assigner: PartitionAssigner, metadata: Record<string, string>): KafkaAssigner {
  return ({ cluster }) => ({
    name: assigner.name,
    version: PROTOCOL_VERSION,
    protocol: ({ topics }) => ({
      name: assigner.name,
      metadata: AssignerProtocol.MemberMetadata.encode({
        version: PROTOCOL_VERSION,
        topics,
        userData: Buffer.from(JSON.stringify(metadata)),
      }),
    }),
    async assign({ members, topics }) {
      const groupMembers: GroupMember[] = members.map(({ memberId, memberMetadata }) => ({
        memberId,
        metadata: memberMetadataOf(memberMetadata),
      }));
      await cluster.refreshMetadataIfNecessary();
      const partitions: TopicPartition[] = topics.flatMap((topic) =>
        cluster.findTopicPartitionMetadata(topic).map(({ partitionId }) => ({ topic, partition: partitionId })),
      );
      const input = { members: groupMembers, partitions };
      const assignment = assigner.assign(input);
      checkAssignment(assigner, input, assignment);
      return groupMembers.map(({ memberId }) => ({
        memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: PROTOCOL_VERSION,
          assignment: byTopic(assignment.get(memberId) ?? []),
          userData: Buffer.alloc(0),
        }),
      }));
    },
  });
}

/** A member that sent unreadable metadata (another client, an old version) is still assigned. */
function memberMetadataOf(encoded: Buffer): Record<string, string> {
  const userData = AssignerProtocol.MemberMetadata.decode(encoded)?.userData;
  if (!userData || userData.length === 0) return {};
  try {
    const parsed: unknown = JSON.parse(userData.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function byTopic(partitions: readonly TopicPartition[]): Record<string, number[]> {
  const result: Record<string, number[]> = {};
  for (const { topic, partition } of partitions) (result[topic] ??= []).push(partition);
  return result;
}
