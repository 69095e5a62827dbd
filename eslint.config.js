// Lint enforces DESIGN.md §3: layers import only what they may, folders are entered through
// their index.ts, no import cycles, and each vendor package stays inside its adapter folder.
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const LAYERS = ['core', 'ingest', 'analyzers', 'scheduler', 'sinks', 'apps', 'cli', 'bench'];

/** What each layer may import from the others (test/ and tools/ may import everything). */
const ALLOWED = {
  core: [],
  ingest: ['core'],
  analyzers: ['core'],
  scheduler: ['core', 'analyzers'],
  sinks: ['core'],
  apps: ['core'],
  cli: LAYERS,
  bench: LAYERS,
};

/** Vendor packages and the only folders that may import them. */
const VENDORS = {
  kafkajs: ['core/bus/kafka'],
  'onnxruntime-node': ['analyzers/onnx'],
  'onnx-proto': ['analyzers/onnx'],
  '@tensorflow/tfjs': ['analyzers/training'],
  '@tensorflow/tfjs-backend-wasm': ['analyzers/training'],
  'prom-client': ['cli'],
  chdb: ['sinks/chdb'],
  '@clickhouse/client': ['sinks/clickhouse'],
  'fluent-ffmpeg': ['ingest'],
  '@ffmpeg-installer/ffmpeg': ['ingest'],
  sharp: ['analyzers/image'],
  pino: ['core/logger.ts'],
  commander: ['cli'],
  'cli-progress': ['cli'],
};

const layerZones = LAYERS.map((layer) => ({
  target: `./${layer}`,
  from: LAYERS.filter((other) => other !== layer && !ALLOWED[layer].includes(other)).map((o) => `./${o}`),
  message: `DESIGN.md §3: ${layer}/ may import only ${ALLOWED[layer].join(', ') || 'node built-ins and its own vendor packages'}.`,
})).filter((zone) => zone.from.length > 0);

/** Inside a layer: parts that feed others and must not know them. */
const partZones = [
  { target: './analyzers/dag', from: './analyzers/backend', message: 'the DAG runner is imported by the backend, not the other way round.' },
];

const restrictVendors = (allowed = []) => [
  'error',
  {
    paths: Object.entries(VENDORS)
      .filter(([pkg]) => !allowed.includes(pkg))
      .map(([name, owners]) => ({ name, message: `${name} is imported only in ${owners.join(', ')}.` })),
  },
];

const packagesByOwner = {};
for (const [pkg, owners] of Object.entries(VENDORS)) {
  for (const owner of owners) (packagesByOwner[owner] ??= []).push(pkg);
}

const vendorRules = [
  { files: ['**/*.ts'], ignores: ['test/**', 'tools/**', 'bench/**'], rules: { '@typescript-eslint/no-restricted-imports': restrictVendors() } },
  ...Object.entries(packagesByOwner).map(([owner, pkgs]) => ({
    files: [owner.endsWith('.ts') ? owner : `${owner}/**/*.ts`],
    rules: { '@typescript-eslint/no-restricted-imports': restrictVendors(pkgs) },
  })),
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', 'tools/convert-models/.venv/**', 'eslint.config.js'] },
  ...tseslint.configs.recommended,
  // Teaches import-x to parse and resolve TypeScript; without it no-cycle sees no imports.
  importX.flatConfigs.typescript,
  {
    files: ['**/*.ts'],
    settings: { 'import-x/resolver-next': [createTypeScriptImportResolver()] },
    rules: {
      'import-x/no-cycle': 'error',
      'import-x/no-restricted-paths': ['error', { zones: [...layerZones, ...partZones] }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // A folder is entered through its index.ts: an import that reaches into another folder
    // (a sibling, a child, another layer) names that folder's index.js. The tools the product
    // uses, the local Kafka broker and ClickHouse server and the prefix-heads models (for
    // `npm run bench`), are entered through their own.
    files: LAYERS.map((l) => `${l}/**/*.ts`),
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{
          regex: '^(\\./|(\\.\\./)+)(?!tools/(kafka|clickhouse|prefix-heads)/index\\.js$)[^./][^/]*/(?!index\\.js$).+$',
          message: 'enter a folder through its index.js (DESIGN.md §3)',
        }],
      }],
    },
  },
  ...vendorRules,
);
