import { z } from 'zod';
import { deploymentSchema } from './deployment-schema.js';
import { appSpecSchema, modelZooSchema } from './schema.js';

export const CONFIG_KINDS = { deployment: deploymentSchema, app: appSpecSchema, models: modelZooSchema } as const;
export type ConfigKind = keyof typeof CONFIG_KINDS;

/** JSON Schema for editors (yaml-language-server), generated from the same zod schemas. */
export function configJsonSchema(kind: ConfigKind): Record<string, unknown> {
  return z.toJSONSchema(CONFIG_KINDS[kind], { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
