/** Topic names are part of the contract between stages. */
export const Topics = {
  frames: 'panoptes.frames',
  results: 'panoptes.results',
  drops: 'panoptes.drops',
  stats: 'panoptes.stats',
  plan: 'panoptes.plan',
  dead: 'panoptes.dead',
  tasks: (model: string): string => `panoptes.tasks.${model}`,
  /**
   * Frames and crops of delay-tolerant sources (replays faster than real time) travel apart:
   * a backend holds them back for live work (plan-ahead), and a partition shared with a live
   * source would hold up the live frames queued behind them.
   */
  backfillFrames: 'panoptes.backfill.frames',
  backfillTasks: (model: string): string => `panoptes.backfill.tasks.${model}`,
} as const;

/** The model whose tasks a topic carries (live or backfill); undefined for a topic that carries no tasks. */
export function taskTopicModel(topic: string): string | undefined {
  const prefix = [Topics.tasks(''), Topics.backfillTasks('')].find((p) => topic.startsWith(p));
  return prefix === undefined ? undefined : topic.slice(prefix.length);
}

/** Whether a topic carries delay-tolerant work (frames or crops of replays faster than real time). */
export const isBackfillTopic = (topic: string): boolean => topic === Topics.backfillFrames || topic.startsWith(Topics.backfillTasks(''));

/** Whether a topic carries frames (live or backfill). */
export const isFramesTopic = (topic: string): boolean => topic === Topics.frames || topic === Topics.backfillFrames;

/** Header carried by every record so a reader can tell a contract version before decoding. */
export const CONTRACT_HEADER = 'panoptes-contract';
