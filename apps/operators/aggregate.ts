export type Gender = 'male' | 'female';

/** One observation of a face's attributes. */
export interface Attributes {
  age?: number;
  gender?: Gender;
  /** Confidence of the gender reading, its weight in the vote. Default 1. */
  score?: number;
}

export interface AttributeSummary {
  trackId: string;
  /** Observations fed for the track, with or without usable values. */
  observations: number;
  /** Median of the ages seen, the latest 1,000 to 2,000 of a long track (mean of the middle two for an even count); absent when none was. */
  age?: number;
  /** The gender with the most score; absent when none was seen or the vote is tied. */
  gender?: Gender;
  /** The winning gender's share of all gender score, 0.5–1. */
  genderShare?: number;
}

export interface AttributeAggregator {
  observe(trackId: string, attributes: Attributes): void;
  summary(trackId: string): AttributeSummary | undefined;
  /** Drops a track's observations, e.g. when its track ends and the summary has been written. */
  forget(trackId: string): void;
}

interface Tally {
  observations: number;
  ages: number[];
  weight: Record<Gender, number>;
}

function median(sorted: readonly number[]): number | undefined {
  if (sorted.length === 0) return undefined;
  const mid = sorted.length >> 1;
  const upper = sorted[mid] as number;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] as number) + upper) / 2;
}

/** Age readings kept per track: the median is of the latest ones (several minutes of a face at 5 fps). */
const MAX_AGES = 2000;

/**
 * Per-track attribute aggregation (billboard faces). One reading per frame is noisy: a face
 * turning away reads ten years older or flips gender. The median ignores a few wild ages, and
 * a score-weighted vote lets confident readings outweigh unsure ones.
 */
export function createAttributeAggregator(): AttributeAggregator {
  const tallies = new Map<string, Tally>();

  return {
    observe(trackId, { age, gender, score = 1 }) {
      let tally = tallies.get(trackId);
      if (!tally) tallies.set(trackId, (tally = { observations: 0, ages: [], weight: { male: 0, female: 0 } }));
      tally.observations += 1;
      if (age !== undefined && Number.isFinite(age) && age >= 0) {
        tally.ages.push(age);
        // A track can live for days (a poster): the median of its latest readings, in bounded memory.
        if (tally.ages.length > MAX_AGES) tally.ages.splice(0, tally.ages.length - MAX_AGES / 2);
      }
      if (gender !== undefined && Number.isFinite(score) && score > 0) tally.weight[gender] += score;
    },

    summary(trackId) {
      const tally = tallies.get(trackId);
      if (!tally) return undefined;
      const summary: AttributeSummary = { trackId, observations: tally.observations };
      const age = median([...tally.ages].sort((a, b) => a - b));
      if (age !== undefined) summary.age = age;
      const { male, female } = tally.weight;
      if (male !== female) {
        summary.gender = male > female ? 'male' : 'female';
        summary.genderShare = Math.max(male, female) / (male + female);
      }
      return summary;
    },

    forget(trackId) {
      tallies.delete(trackId);
    },
  };
}
