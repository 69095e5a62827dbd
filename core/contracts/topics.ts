/** Topic names are part of the contract between stages. */
export const Topics = {
  frames: 'panoptes.frames',
  results: 'panoptes.results',
  drops: 'panoptes.drops',
  stats: 'panoptes.stats',
  plan: 'panoptes.plan',
  dead: 'panoptes.dead',
  tasks: (model: string): string => `panoptes.tasks.${model}`,
} as const;

/** The model whose tasks a topic carries; undefined for a topic that carries no tasks. */
export function taskTopicModel(topic: string): string | undefined {
  const prefix = Topics.tasks('');
  return topic.startsWith(prefix) ? topic.slice(prefix.length) : undefined;
}

/** Header carried by every record so a reader can tell a contract version before decoding. */
export const CONTRACT_HEADER = 'panoptes-contract';
