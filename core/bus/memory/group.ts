/**
 * A consumer group: its members, who owns which partition, which partition has a batch in
 * flight, and the committed offsets.
 *
 * Two maps keep "one member per partition at a time":
 * - `owners` is the assignment. Every join and leave recomputes it with the leader's assigner
 *   (the leader is the longest-standing member, as in Kafka).
 * - `claims` marks a partition whose batch is being handled. A member only starts a batch on a
 *   partition that it owns and nobody has claimed, so a member that lost a partition in a
 *   rebalance finishes (and commits) its batch before the new owner starts.
 *
 * The group outlives its members: committed offsets stay, so a restarted consumer resumes.
 */
import { checkAssignment, compareTopicPartitions, roundRobinAssigner, topicPartitionKey } from '../assigners.js';
import type { PartitionAssigner, TopicPartition, TopicPartitionOffset } from '../types.js';
import type { Topic } from './topic.js';

/** What the group needs from a member (the memory consumer). */
export interface Member {
  readonly memberId: string;
  readonly metadata: Record<string, string>;
  readonly topics: readonly Topic[];
  readonly assigner: PartitionAssigner;
  /** The group rebalanced; the member's partitions may have changed. */
  assignmentChanged(): void;
  /** Something the member may be waiting for happened (a partition was freed). */
  wake(): void;
}

export class Group {
  private members: Member[] = [];
  private owners = new Map<string, Member>();
  private assignments = new Map<string, TopicPartition[]>();
  private readonly claims = new Map<string, Member>();
  private readonly offsets = new Map<string, number>();

  constructor(
    readonly groupId: string,
    /** Called after every commit, so the bus can free records and let waiting sends in. */
    private readonly committedHook: (tp: TopicPartitionOffset) => void,
  ) {}

  get memberIds(): string[] {
    return this.members.map((member) => member.memberId);
  }

  /** Adds the member and rebalances; throws (and leaves the group as it was) if the assigner fails. */
  join(member: Member): void {
    this.members.push(member);
    try {
      this.rebalance(this.leader().assigner);
    } catch (err) {
      this.members.pop();
      throw err;
    }
  }

  /**
   * Removes the member and rebalances. Leaving must not fail, so if the leader's assigner throws
   * here the group falls back to round-robin rather than keeping partitions on a gone member.
   */
  leave(member: Member): void {
    this.members = this.members.filter((other) => other !== member);
    const leader = this.members[0];
    if (!leader) return this.rebalance(roundRobinAssigner);
    try {
      this.rebalance(leader.assigner);
    } catch {
      this.rebalance(roundRobinAssigner);
    }
  }

  assignmentOf(member: Member): TopicPartition[] {
    return (this.assignments.get(member.memberId) ?? []).map((tp) => ({ ...tp }));
  }

  ownerOf(tp: TopicPartition): Member | undefined {
    return this.owners.get(topicPartitionKey(tp));
  }

  claimantOf(tp: TopicPartition): Member | undefined {
    return this.claims.get(topicPartitionKey(tp));
  }

  /** Marks a batch in flight; the caller checked that the partition was free. */
  claim(member: Member, tp: TopicPartition): void {
    this.claims.set(topicPartitionKey(tp), member);
  }

  /** Ends a batch and wakes the partition's owner, which may have been waiting for it. */
  unclaim(member: Member, tp: TopicPartition): void {
    const key = topicPartitionKey(tp);
    if (this.claims.get(key) === member) this.claims.delete(key);
    this.ownerOf(tp)?.wake();
  }

  committed(tp: TopicPartition): number | undefined {
    return this.offsets.get(topicPartitionKey(tp));
  }

  commit(tpo: TopicPartitionOffset): void {
    this.offsets.set(topicPartitionKey(tpo), tpo.offset);
    this.committedHook(tpo);
  }

  committedFor(topic: string): TopicPartitionOffset[] {
    const result: TopicPartitionOffset[] = [];
    for (const [key, offset] of this.offsets) {
      const separator = key.lastIndexOf(':');
      if (key.slice(0, separator) !== topic) continue;
      result.push({ topic, partition: Number(key.slice(separator + 1)), offset });
    }
    return result.sort(compareTopicPartitions);
  }

  private leader(): Member {
    const leader = this.members[0];
    if (!leader) throw new Error('invariant: a group that rebalances on join has a member');
    return leader;
  }

  private rebalance(assigner: PartitionAssigner): void {
    const assignments = computeAssignment(this.members, assigner);
    const owners = new Map<string, Member>();
    for (const member of this.members) {
      for (const tp of assignments.get(member.memberId) ?? []) owners.set(topicPartitionKey(tp), member);
    }
    this.assignments = assignments;
    this.owners = owners;
    for (const member of this.members) member.assignmentChanged();
  }
}

/**
 * Runs the assigner once per set of members with the same subscription, over the partitions of
 * the topics that set subscribes to, so a member only gets partitions of its own topics. In the
 * usual case (every member subscribes to the same topics) that is a single call.
 */
function computeAssignment(members: readonly Member[], assigner: PartitionAssigner): Map<string, TopicPartition[]> {
  const topics = new Map<string, Topic>();
  for (const member of members) for (const topic of member.topics) topics.set(topic.name, topic);

  const bySubscribers = new Map<string, { members: Member[]; partitions: TopicPartition[] }>();
  for (const topic of [...topics.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const subscribers = members.filter((member) => member.topics.some((t) => t.name === topic.name));
    const key = subscribers.map((member) => member.memberId).join('\n');
    const entry = bySubscribers.get(key) ?? { members: subscribers, partitions: [] };
    for (const log of topic.partitions) entry.partitions.push({ topic: topic.name, partition: log.partition });
    bySubscribers.set(key, entry);
  }

  const result = new Map<string, TopicPartition[]>(members.map((member) => [member.memberId, []]));
  for (const entry of bySubscribers.values()) {
    const input = {
      members: entry.members.map((member) => ({ memberId: member.memberId, metadata: { ...member.metadata } })),
      partitions: entry.partitions,
    };
    const assignment = assigner.assign(input);
    checkAssignment(assigner, input, assignment);
    for (const [memberId, partitions] of assignment) result.get(memberId)?.push(...partitions);
  }
  for (const partitions of result.values()) partitions.sort(compareTopicPartitions);
  return result;
}
