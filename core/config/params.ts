import type { z } from 'zod';
import { checkAgainst, type ConfigIssue } from './load.js';
import { cacheSchemaFor, type AppSpec, type ModelSpec } from './schema.js';

/**
 * What a node's params may be for a model of one architecture: the analyzers know, core does
 * not. `check` says what the schema cannot (class names the model knows), on params it accepted.
 */
export interface ParamsRules {
  schema: z.ZodType;
  check?: (params: never, model: ModelSpec) => { path: string; message: string }[];
}
export type ParamsRulesByArchitecture = Readonly<Record<string, ParamsRules>>;

/**
 * A node's params checked for `model`, each problem at its key under `at` (`nodes[0].params`).
 * The node's `cache:` is checked on its own (`checkCache`), not here.
 */
export function paramsIssues(params: Record<string, unknown>, model: ModelSpec, rules: ParamsRulesByArchitecture, file: string, at: string): ConfigIssue[] {
  const own = Object.hasOwn(rules, model.architecture) ? rules[model.architecture] : undefined;
  // An architecture nothing runs is the zoo's problem, said there once (`loadModelZoo`).
  if (!own) return [];
  const { issues, parsed } = checkAgainst(own.schema, params, file, [at]);
  if (issues.length > 0 || !own.check) return issues;
  return own.check(parsed as never, model).map(({ path, message }) => ({ file, path: `${at}.${path}`, message }));
}

/** The local model of `ingest.localAnalysis` runs each app's frames-fed nodes of `replaces` with their own params: it must take them. */
export function localParamsIssues(apps: readonly AppSpec[], local: { model: string; replaces?: string | undefined }, model: ModelSpec, rules: ParamsRulesByArchitecture, file: string): ConfigIssue[] {
  const at = 'ingest.localAnalysis.model';
  return apps.flatMap((app) =>
    app.nodes
      .filter((node) => node.model === (local.replaces ?? local.model) && app.edges.some((e) => e.from === 'frames' && e.to === node.id))
      .flatMap((node) =>
        paramsIssues(node.params, model, rules, file, 'params').map((issue) => ({
          ...issue,
          path: at,
          message: `${local.model} runs node "${node.id}" of app ${app.name} in its place, with that node's ${issue.path}: ${issue.message}`,
        })),
      ),
  );
}

/** A node's `cache:` against what a cache on its model's architecture takes. */
export function checkCache(node: AppSpec['nodes'][number], i: number, architecture: string | undefined): Omit<ConfigIssue, 'file'>[] {
  const schema = cacheSchemaFor(architecture);
  if (!schema) {
    return [{ path: `nodes[${i}].cache`, message: `node "${node.id}" runs ${node.model}; learned caches in apps run on object detectors (centernet), image classifiers (efficientnet-lite) and face attributes (faceres)` }];
  }
  const parsed = schema.safeParse(node.cache);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => ({
    path: [`nodes[${i}].cache`, ...issue.path.map(String)].join('.'),
    message: `${issue.message} (a cache on ${architecture}: docs/learned-caches.md)`,
  }));
}
