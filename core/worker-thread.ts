import { Worker } from 'node:worker_threads';

/**
 * A worker thread on the module `<name>.js` beside `base` (an `import.meta.url`) when built, or
 * on `<name>.ts` through tsx's loader when running from source (tests, tsx): a worker does not
 * inherit the parent's loader hooks.
 */
export function startModuleWorker(base: string, name: string): Worker {
  if (!base.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, base));
  const tsx = import.meta.resolve('tsx/esm/api');
  const worker = new URL(`./${name}.ts`, base).href;
  return new Worker(`import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(worker)}); })`, { eval: true });
}
