// Records today's encoding of each contract under test/fixtures/contracts/<kind>.v<version>.bin.
// Run after adding a contract version: `npx tsx tools/record-contract-fixtures.ts`.
// Existing files are never overwritten: they are what older writers put on the bus.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dropContract, frameContract, planContract, resultRowContract, statsContract, taskContract, type Contract } from '../core/index.js';
import * as samples from '../test/fixtures/contracts/samples.js';

const dir = join(import.meta.dirname, '../test/fixtures/contracts');
const pairs: [Contract<never>, unknown][] = [
  [frameContract as Contract<never>, samples.frame],
  [taskContract as Contract<never>, samples.task],
  [resultRowContract as Contract<never>, samples.resultRow],
  [dropContract as Contract<never>, samples.drop],
  [statsContract as Contract<never>, samples.stats],
  [planContract as Contract<never>, samples.plan],
];
for (const [contract, sample] of pairs) {
  const file = join(dir, `${contract.kind}.v${contract.version}.bin`);
  if (existsSync(file)) continue;
  writeFileSync(file, contract.encode(sample as never));
  console.log(`recorded ${file}`);
}
