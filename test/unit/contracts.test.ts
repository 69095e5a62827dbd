import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ContractKind,
  dropContract,
  ErrorCode,
  frameContract,
  planContract,
  projectRoot,
  resultRowContract,
  statsContract,
  taskContract,
  type Contract,
  type Frame,
} from '../../core/index.js';
import * as samples from '../fixtures/contracts/samples.js';
import { thrown } from '../helpers.js';

const FIXTURES = join(projectRoot(), 'test/fixtures/contracts');

/** Every contract with its sample message, by kind. */
const CONTRACTS: Record<ContractKind, { contract: Contract<unknown>; sample: unknown }> = {
  frame: { contract: frameContract as Contract<unknown>, sample: samples.frame },
  task: { contract: taskContract as Contract<unknown>, sample: samples.task },
  resultRow: { contract: resultRowContract as Contract<unknown>, sample: samples.resultRow },
  drop: { contract: dropContract as Contract<unknown>, sample: samples.drop },
  stats: { contract: statsContract as Contract<unknown>, sample: samples.stats },
  plan: { contract: planContract as Contract<unknown>, sample: samples.plan },
};

const KINDS = Object.keys(ContractKind) as ContractKind[];

/** Messages with a `jpeg` blob are compared with the blob as plain bytes. */
function comparable(message: unknown): unknown {
  if (message && typeof message === 'object' && 'jpeg' in message) {
    const { jpeg, ...rest } = message as { jpeg: Uint8Array };
    return { ...rest, jpeg: Array.from(jpeg) };
  }
  return message;
}


/** A message of `kind` with a hand-written header (the codec's wire envelope). */
function envelope(kind: ContractKind, version: number, header: string | Buffer, blob = Buffer.alloc(0)): Uint8Array {
  const json = typeof header === 'string' ? Buffer.from(header, 'utf8') : header;
  const prefix = Buffer.alloc(7);
  prefix[0] = 0x50;
  prefix[1] = ContractKind[kind];
  prefix[2] = version;
  prefix.writeUInt32BE(json.length, 3);
  return Buffer.concat([prefix, json, blob]);
}

describe('contracts', () => {
  it('has a contract and a sample for every kind', () => {
    expect(Object.keys(CONTRACTS).sort()).toEqual([...KINDS].sort());
    for (const kind of KINDS) expect(CONTRACTS[kind].contract.kind).toBe(kind);
  });

  describe.each(KINDS)('%s', (kind) => {
    const { contract, sample } = CONTRACTS[kind];

    it('round-trips its sample', () => {
      const bytes = contract.encode(sample);
      expect(bytes[0]).toBe(0x50);
      expect(bytes[1]).toBe(ContractKind[kind]);
      expect(bytes[2]).toBe(contract.version);
      expect(comparable(contract.decode(bytes))).toEqual(comparable(sample));
    });

    it('decodes from a Uint8Array view into a larger buffer', () => {
      const bytes = contract.encode(sample);
      const padded = new Uint8Array(bytes.length + 16);
      padded.set(bytes, 8);
      const view = padded.subarray(8, 8 + bytes.length);
      expect(comparable(contract.decode(view))).toEqual(comparable(sample));
    });

    it('rejects a message that is not a Panoptes message', () => {
      const bytes = Buffer.from(contract.encode(sample));
      bytes[0] = 0x51;
      expect(thrown(() => contract.decode(bytes)).code).toBe(ErrorCode.ContractDecode);
      expect(thrown(() => contract.decode(new Uint8Array(0))).code).toBe(ErrorCode.ContractDecode);
      expect(thrown(() => contract.decode(Buffer.from('{"hello":"world"}'))).code).toBe(ErrorCode.ContractDecode);
    });

    it('rejects an unknown version with PANOPTES_CONTRACT_VERSION', () => {
      const bytes = Buffer.from(contract.encode(sample));
      bytes[2] = contract.version + 40;
      const err = thrown(() => contract.decode(bytes));
      expect(err.code).toBe(ErrorCode.ContractVersion);
      expect(err.details).toMatchObject({ kind, version: contract.version + 40 });
    });

    it('rejects a header that runs past the end of the message', () => {
      const bytes = contract.encode(sample);
      const headerLength = Buffer.from(bytes).readUInt32BE(3);
      // Cut inside the JSON header.
      const cut = bytes.subarray(0, 7 + Math.floor(headerLength / 2));
      expect(thrown(() => contract.decode(cut)).code).toBe(ErrorCode.ContractDecode);
      // Cut inside the 7-byte prefix.
      expect(thrown(() => contract.decode(bytes.subarray(0, 5))).code).toBe(ErrorCode.ContractDecode);
    });

    it('rejects a header that is not JSON', () => {
      const err = thrown(() => contract.decode(envelope(kind, contract.version, '{not json')));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      const binary = thrown(() => contract.decode(envelope(kind, contract.version, Buffer.from([0xff, 0xfe, 0x00, 0x7b]))));
      expect(binary.code).toBe(ErrorCode.ContractDecode);
    });

    it('rejects a header that is JSON but not an object of the schema', () => {
      for (const header of ['null', '42', '[]', '{}']) {
        expect(thrown(() => contract.decode(envelope(kind, contract.version, header))).code).toBe(ErrorCode.ContractDecode);
      }
    });
  });

  describe('recorded fixtures', () => {
    const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.bin'));

    it('has at least one recording of every kind at every current version', () => {
      for (const kind of KINDS) expect(files).toContain(`${kind}.v${CONTRACTS[kind].contract.version}.bin`);
    });

    it.each(files)('%s decodes with today\'s decoder to the sample', (file) => {
      const match = /^([A-Za-z]+)\.v(\d+)\.bin$/.exec(file);
      expect(match, `fixture name ${file} should be <kind>.v<version>.bin`).not.toBeNull();
      const kind = match?.[1] as ContractKind;
      const version = Number(match?.[2]);
      expect(KINDS).toContain(kind);
      const bytes = new Uint8Array(readFileSync(join(FIXTURES, file)));
      expect(bytes[1]).toBe(ContractKind[kind]);
      expect(bytes[2]).toBe(version);
      const { contract, sample } = CONTRACTS[kind];
      expect(comparable(contract.decode(bytes))).toEqual(comparable(sample));
    });
  });

  describe('errors', () => {
    it('refuses a message of another kind (a frame given to the task decoder)', () => {
      const err = thrown(() => taskContract.decode(frameContract.encode(samples.frame)));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      expect(err.details).toMatchObject({ kind: 'task' });
      expect(thrown(() => frameContract.decode(resultRowContract.encode(samples.resultRow))).code).toBe(ErrorCode.ContractDecode);
    });

    it('names the failing field when the header fails the schema (a negative seq)', () => {
      const { jpeg, ...header } = samples.frame;
      const bytes = envelope('frame', frameContract.version, JSON.stringify({ ...header, seq: -1 }), Buffer.from(jpeg));
      const err = thrown(() => frameContract.decode(bytes));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      expect(err.message).toContain('seq');
    });

    it('names a nested failing field (a task region with a string coordinate)', () => {
      const { jpeg: _jpeg, ...header } = samples.task;
      const bad = { ...header, region: { ...header.region, x2: 'wide' } };
      const err = thrown(() => taskContract.decode(envelope('task', taskContract.version, JSON.stringify(bad))));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      expect(err.message).toContain('region.x2');
    });

    it('names a missing field', () => {
      const { source: _source, ...rest } = samples.resultRow;
      const err = thrown(() => resultRowContract.decode(envelope('resultRow', resultRowContract.version, JSON.stringify(rest))));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      expect(err.message).toContain('source');
    });

    it('refuses a result row whose table is not a SQL identifier', () => {
      const bad = { ...samples.resultRow, table: 'detections; DROP TABLE x' };
      const err = thrown(() => resultRowContract.decode(envelope('resultRow', resultRowContract.version, JSON.stringify(bad))));
      expect(err.code).toBe(ErrorCode.ContractDecode);
      expect(err.message).toContain('table');
    });
  });

  describe('blobs', () => {
    it('keeps a 100 KB random JPEG blob of a frame exactly', () => {
      const jpeg = new Uint8Array(randomBytes(100 * 1024));
      const frame: Frame = { ...samples.frame, jpeg };
      const decoded = frameContract.decode(frameContract.encode(frame));
      expect(decoded.jpeg.length).toBe(jpeg.length);
      expect(Buffer.compare(Buffer.from(decoded.jpeg), Buffer.from(jpeg))).toBe(0);
      expect(comparable(decoded)).toEqual(comparable(frame));
    });

    it('keeps an empty blob empty', () => {
      const decoded = frameContract.decode(frameContract.encode({ ...samples.frame, jpeg: new Uint8Array(0) }));
      expect(decoded.jpeg.length).toBe(0);
    });

    it('keeps bytes that look like a header in the blob', () => {
      const jpeg = frameContract.encode(samples.frame);
      const decoded = frameContract.decode(frameContract.encode({ ...samples.frame, jpeg }));
      expect(Array.from(decoded.jpeg)).toEqual(Array.from(jpeg));
    });
  });
});
