import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/index.js';

/** The layering rules of DESIGN.md §3 are lint rules: check that they fire. */
const eslint = new ESLint({ cwd: projectRoot() });

async function rulesHit(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(projectRoot(), file) });
  return (result?.messages ?? []).map((m) => m.ruleId ?? m.message);
}

describe('lint enforces the layout', () => {
  it('keeps ingest, analyzers and sinks from importing each other', async () => {
    expect(await rulesHit('ingest/x.ts', "import { createChdbSink } from '../sinks/index.js';\nexport const x = createChdbSink;\n")).toContain('import-x/no-restricted-paths');
    expect(await rulesHit('sinks/x.ts', "import { decodeJpeg } from '../analyzers/index.js';\nexport const x = decodeJpeg;\n")).toContain('import-x/no-restricted-paths');
  });

  it('lets every layer import core, and cli import everything', async () => {
    expect(await rulesHit('ingest/x.ts', "import { Topics } from '../core/index.js';\nexport const x = Topics;\n")).toEqual([]);
    expect(await rulesHit('cli/x.ts', "import { createChdbSink } from '../sinks/index.js';\nexport const x = createChdbSink;\n")).toEqual([]);
  });

  it('keeps the DAG runner free of the backend that uses it', async () => {
    expect(await rulesHit('analyzers/dag/x.ts', "import { createBackend } from '../backend/index.js';\nexport const x = createBackend;\n")).toContain('import-x/no-restricted-paths');
    expect(await rulesHit('analyzers/backend/x.ts', "import { createDagRunner } from '../dag/index.js';\nexport const x = createDagRunner;\n")).toEqual([]);
  });

  it('enters a folder through its index.ts', async () => {
    expect(await rulesHit('apps/x.ts', "import { frameContract } from '../core/contracts/index.js';\nexport const x = frameContract;\n")).toContain('no-restricted-imports');
    expect(await rulesHit('analyzers/backend/x.ts', "import { loadModelRunner } from '../models/zoo.js';\nexport const x = loadModelRunner;\n")).toContain('no-restricted-imports');
  });

  it('keeps each vendor package in its adapter folder', async () => {
    expect(await rulesHit('apps/x.ts', "import { Session } from 'chdb';\nexport const x = Session;\n")).toContain('@typescript-eslint/no-restricted-imports');
    expect(await rulesHit('sinks/chdb/x.ts', "import { Session } from 'chdb';\nexport const x = Session;\n")).toEqual([]);
    expect(await rulesHit('ingest/x.ts', "import ort from 'onnxruntime-node';\nexport const x = ort;\n")).toContain('@typescript-eslint/no-restricted-imports');
  });
});
