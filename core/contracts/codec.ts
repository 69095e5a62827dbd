import type { z } from 'zod';
import { ErrorCode, PanoptesError } from '../errors.js';
import { CONTRACT_HEADER } from './topics.js';

/**
 * The wire envelope shared by every message on the bus:
 *
 *   byte 0      0x50 ('P'), marks a Panoptes message
 *   byte 1      contract kind (see `ContractKind`)
 *   byte 2      contract version
 *   bytes 3..6  header length, uint32 big-endian
 *   header      UTF-8 JSON, validated by the contract's schema on decode
 *   rest        an optional binary blob (JPEG bytes for frames and crops)
 *
 * JSON keeps the headers readable in a topic dump; the blob keeps images out of JSON.
 * A decoder accepts every version it lists in `upgrades` and returns the newest shape.
 */
export const ContractKind = { frame: 1, task: 2, resultRow: 3, drop: 4, stats: 5, plan: 6 } as const;
export type ContractKind = keyof typeof ContractKind;

const MAGIC = 0x50;
const PREFIX_BYTES = 7;

export interface Contract<T> {
  readonly kind: ContractKind;
  readonly version: number;
  /** Headers for a record carrying this contract: `panoptes-contract: <kind>/<version>`. */
  readonly headers: Readonly<Record<string, string>>;
  encode(message: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

interface ContractDefinition<T, H> {
  kind: ContractKind;
  version: number;
  header: z.ZodType<H>;
  /** Splits a message into its JSON header and its blob. */
  split(message: T): { header: H; blob?: Uint8Array };
  join(header: H, blob: Uint8Array): T;
  /** Older versions this decoder still reads: version → function from its header to today's. */
  upgrades?: Record<number, (oldHeader: unknown) => unknown>;
}

export function defineContract<T, H>(definition: ContractDefinition<T, H>): Contract<T> {
  const { kind, version } = definition;
  const fail = (message: string, cause?: unknown): PanoptesError =>
    new PanoptesError(ErrorCode.ContractDecode, `cannot decode ${kind} message: ${message}`, {
      cause,
      details: { kind },
    });

  return {
    kind,
    version,
    headers: Object.freeze({ [CONTRACT_HEADER]: `${kind}/${version}` }),
    encode(message) {
      const { header, blob } = definition.split(message);
      const json = Buffer.from(JSON.stringify(header), 'utf8');
      const out = Buffer.allocUnsafe(PREFIX_BYTES + json.length + (blob?.length ?? 0));
      out[0] = MAGIC;
      out[1] = ContractKind[kind];
      out[2] = version;
      out.writeUInt32BE(json.length, 3);
      json.copy(out, PREFIX_BYTES);
      if (blob) out.set(blob, PREFIX_BYTES + json.length);
      return out;
    },
    decode(bytes) {
      if (bytes.length < PREFIX_BYTES || bytes[0] !== MAGIC) throw fail('not a Panoptes message');
      if (bytes[1] !== ContractKind[kind]) {
        throw fail(`it is a message of kind ${String(bytes[1])}, expected ${ContractKind[kind]}`);
      }
      const messageVersion = bytes[2] ?? 0;
      const upgrade = messageVersion === version ? undefined : definition.upgrades?.[messageVersion];
      if (messageVersion !== version && !upgrade) {
        throw new PanoptesError(
          ErrorCode.ContractVersion,
          `${kind} message has version ${messageVersion}; this build reads ${[version, ...Object.keys(definition.upgrades ?? {})].join(', ')}`,
          { details: { kind, version: messageVersion } },
        );
      }
      const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const headerLength = view.readUInt32BE(3);
      if (PREFIX_BYTES + headerLength > bytes.length) throw fail('header runs past the end of the message');
      let raw: unknown;
      try {
        // A lone surrogate ("\ud800") is valid JSON but not Unicode, and ClickHouse refuses a whole
        // insert over one: such a string is read as TextDecoder reads bad UTF-8, with U+FFFD. Text
        // decoded from UTF-8 holds one only through a \u escape, so only such a header pays for the check.
        const json = view.toString('utf8', PREFIX_BYTES, PREFIX_BYTES + headerLength);
        raw = json.includes('\\u') ? JSON.parse(json, (_key, value: unknown) => (typeof value === 'string' ? value.toWellFormed() : value)) : JSON.parse(json);
      } catch (err) {
        throw fail('header is not JSON', err);
      }
      const parsed = definition.header.safeParse(upgrade ? upgrade(raw) : raw);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw fail(`${issue?.path.join('.') || 'header'}: ${issue?.message ?? 'invalid'}`, parsed.error);
      }
      return definition.join(parsed.data, bytes.subarray(PREFIX_BYTES + headerLength));
    },
  };
}

/** A contract whose message is its JSON header, with no blob. */
export function defineJsonContract<T>(kind: ContractKind, version: number, schema: z.ZodType<T>): Contract<T> {
  return defineContract<T, T>({ kind, version, header: schema, split: (message) => ({ header: message }), join: (header) => header });
}
