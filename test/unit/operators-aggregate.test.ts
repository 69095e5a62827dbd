import { describe, expect, it } from 'vitest';
import { createAttributeAggregator, type Attributes, type AttributeSummary } from '../../apps/operators/index.js';

/** Feeds one track's observations; returns its summary. */
function summarize(observations: Attributes[]): AttributeSummary | undefined {
  const aggregator = createAttributeAggregator();
  for (const o of observations) aggregator.observe('1-0', o);
  return aggregator.summary('1-0');
}

describe('createAttributeAggregator', () => {
  it.each([
    // ages seen, median
    { ages: [30], median: 30 },
    { ages: [30, 80, 31], median: 31 },
    { ages: [25, 35], median: 30 },
    { ages: [40, 20, 90, 30], median: 35 },
  ])('the median of $ages is $median', ({ ages, median }) => {
    expect(summarize(ages.map((age) => ({ age })))?.age).toBe(median);
  });

  it.each([
    // gender readings with their scores, the winner
    { readings: [['male', 0.9]], gender: 'male', share: 1 },
    { readings: [['male', 0.9], ['female', 0.4], ['female', 0.4]], gender: 'male', share: 0.9 / 1.7 },
    { readings: [['male', 0.3], ['female', 0.4], ['male', 0.3]], gender: 'male', share: 0.6 / 1.0 },
    { readings: [['female', 0.6], ['male', 0.2], ['male', 0.2]], gender: 'female', share: 0.6 / 1.0 },
  ] as const)('score-weighted vote $readings → $gender', ({ readings, gender, share }) => {
    const summary = summarize(readings.map(([g, score]) => ({ gender: g, score })));
    expect(summary?.gender).toBe(gender);
    expect(summary?.genderShare).toBeCloseTo(share, 10);
  });

  it('counts a reading without a score as weight 1, and leaves a tie undecided', () => {
    expect(summarize([{ gender: 'female' }, { gender: 'male', score: 0.5 }])?.gender).toBe('female');
    expect(summarize([{ gender: 'female', score: 0.5 }, { gender: 'male', score: 0.5 }])).toEqual({ trackId: '1-0', observations: 2 });
  });

  it('counts every observation and ignores unusable values', () => {
    expect(summarize([{}, { age: Number.NaN }, { age: -1 }, { age: 42, gender: 'male', score: 0 }, { age: 44 }])).toEqual({
      trackId: '1-0',
      observations: 5,
      age: 43,
    });
  });

  it('keeps the median of the latest ages of a track that lives for days, in bounded memory', () => {
    // 10,000 readings of 80 (an old poster), then 1,500 of 30: the median follows the latest.
    const aged = summarize([...Array.from({ length: 10_000 }, () => ({ age: 80 })), ...Array.from({ length: 1_500 }, () => ({ age: 30 }))]);
    expect(aged).toMatchObject({ observations: 11_500, age: 30 });
  });

  it('keeps tracks apart, and forgets one on request', () => {
    const aggregator = createAttributeAggregator();
    aggregator.observe('a', { age: 20, gender: 'female', score: 0.8 });
    aggregator.observe('b', { age: 60, gender: 'male', score: 0.7 });
    expect(aggregator.summary('a')).toEqual({ trackId: 'a', observations: 1, age: 20, gender: 'female', genderShare: 1 });
    aggregator.forget('a');
    expect(aggregator.summary('a')).toBeUndefined();
    expect(aggregator.summary('b')?.age).toBe(60);
    expect(aggregator.summary('never')).toBeUndefined();
  });
});
