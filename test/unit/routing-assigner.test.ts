import { describe, expect, it } from 'vitest';
import { routingAssigner, type GroupMember, type RoutingWeights, type TopicPartition } from '../../core/bus/index.js';
import { planWeights, type Plan } from '../../core/index.js';

const member = (memberId: string, backend?: string): GroupMember => ({ memberId, metadata: backend ? { backend } : {} });
const partitionsOf = (topic: string, count: number): TopicPartition[] => Array.from({ length: count }, (_, partition) => ({ topic, partition }));
const counts = (assignment: Map<string, TopicPartition[]>): Record<string, number> =>
  Object.fromEntries([...assignment].map(([id, tps]) => [id, tps.length]));

describe('routing assigner', () => {
  it('splits each topic in proportion to the weights, by largest remainder', () => {
    const weights: Record<string, RoutingWeights> = { frames: { gpu0: 3, gpu1: 1 }, tasks: { gpu0: 1, gpu1: 1, gpu2: 1 } };
    const assigner = routingAssigner((topic) => weights[topic]);
    const members = [member('m0', 'gpu0'), member('m1', 'gpu1'), member('m2', 'gpu2')];
    const frames = assigner.assign({ members, partitions: partitionsOf('frames', 8) });
    expect(counts(frames)).toEqual({ m0: 6, m1: 2, m2: 0 });
    // 10 over three equal weights: 3.33 each, the spare partition to the first member by id.
    expect(counts(assigner.assign({ members, partitions: partitionsOf('tasks', 10) }))).toEqual({ m0: 4, m1: 3, m2: 3 });
  });

  it('gives every partition to exactly one member, the same way whatever the input order', () => {
    const assigner = routingAssigner(() => ({ a: 0.5, b: 0.3, c: 0.2 }));
    const members = [member('x', 'a'), member('y', 'b'), member('z', 'c')];
    const partitions = [...partitionsOf('t1', 7), ...partitionsOf('t2', 3)];
    const assignment = assigner.assign({ members, partitions });
    const given = [...assignment.values()].flat().map((tp) => `${tp.topic}:${tp.partition}`).sort();
    expect(given).toEqual(partitions.map((tp) => `${tp.topic}:${tp.partition}`).sort());
    expect(assigner.assign({ members: [...members].reverse(), partitions: [...partitions].reverse() })).toEqual(assignment);
  });

  it('deals round-robin where the plan has no weights or none of its backends is a member', () => {
    const assigner = routingAssigner((topic) => (topic === 'routed' ? { gone: 1 } : undefined));
    const members = [member('m0', 'gpu0'), member('m1')];
    expect(counts(assigner.assign({ members, partitions: partitionsOf('unrouted', 4) }))).toEqual({ m0: 2, m1: 2 });
    expect(counts(assigner.assign({ members, partitions: partitionsOf('routed', 4) }))).toEqual({ m0: 2, m1: 2 });
  });

  it('survives weights no plan should hold: huge, infinite, negative', () => {
    const assigner = routingAssigner(() => ({ a: 1e308, b: 1e308, c: Infinity, d: -1 }));
    const members = [member('ma', 'a'), member('mb', 'b'), member('mc', 'c'), member('md', 'd')];
    expect(counts(assigner.assign({ members, partitions: partitionsOf('t', 10) }))).toEqual({ ma: 5, mb: 5, mc: 0, md: 0 });
  });

  it('deals round-robin on across topics, so no member gets the spare partition of every topic', () => {
    const assigner = routingAssigner(() => undefined);
    const members = [member('m0'), member('m1')];
    const partitions = ['t1', 't2', 't3'].flatMap((topic) => partitionsOf(topic, 3));
    expect(counts(assigner.assign({ members, partitions }))).toEqual({ m0: 5, m1: 4 });
  });

  it('reads the weights from a plan, summing the sessions that share a topic', () => {
    const plan: Plan = {
      epoch: 3,
      createdAtMs: 0,
      sessions: [],
      backends: [],
      routing: [
        { session: 'ssd-100', topic: 'panoptes.frames', weights: { gpu0: 2 } },
        { session: 'ssd-200', topic: 'panoptes.frames', weights: { gpu0: 1, gpu1: 3 } },
      ],
    };
    expect(planWeights(plan)('panoptes.frames')).toEqual({ gpu0: 3, gpu1: 3 });
    expect(planWeights(plan)('panoptes.tasks.ocr')).toBeUndefined();
    expect(planWeights(undefined)('panoptes.frames')).toBeUndefined();
  });
});
