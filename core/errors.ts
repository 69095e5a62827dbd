/**
 * Errors with stable codes. Code decides behaviour (retry, skip, stop), never message text.
 * `retriable` is read by the retry helpers only; programming errors are never retried.
 */
export const ErrorCode = {
  ConfigInvalid: 'PANOPTES_CONFIG_INVALID',
  ConfigNotFound: 'PANOPTES_CONFIG_NOT_FOUND',
  ContractDecode: 'PANOPTES_CONTRACT_DECODE',
  ContractVersion: 'PANOPTES_CONTRACT_VERSION',
  BusClosed: 'PANOPTES_BUS_CLOSED',
  BusUnknownTopic: 'PANOPTES_BUS_UNKNOWN_TOPIC',
  BusInvalidArgument: 'PANOPTES_BUS_INVALID_ARGUMENT',
  BusUnavailable: 'PANOPTES_BUS_UNAVAILABLE',
  SourceNotFound: 'PANOPTES_SOURCE_NOT_FOUND',
  SourceDecode: 'PANOPTES_SOURCE_DECODE',
  SourceUnsupportedCodec: 'PANOPTES_SOURCE_UNSUPPORTED_CODEC',
  SourceOffline: 'PANOPTES_SOURCE_OFFLINE',
  SourceUnavailable: 'PANOPTES_SOURCE_UNAVAILABLE',
  FfmpegExited: 'PANOPTES_FFMPEG_EXITED',
  FfmpegNotFound: 'PANOPTES_FFMPEG_NOT_FOUND',
  ModelLoad: 'PANOPTES_MODEL_LOAD',
  ModelRun: 'PANOPTES_MODEL_RUN',
  ImageDecode: 'PANOPTES_IMAGE_DECODE',
  AppNotFound: 'PANOPTES_APP_NOT_FOUND',
  AppInvalid: 'PANOPTES_APP_INVALID',
  SinkUnavailable: 'PANOPTES_SINK_UNAVAILABLE',
  SinkSchemaMismatch: 'PANOPTES_SINK_SCHEMA_MISMATCH',
  SinkInsert: 'PANOPTES_SINK_INSERT',
  QueryReadOnly: 'PANOPTES_QUERY_READ_ONLY',
  QueryFailed: 'PANOPTES_QUERY_FAILED',
  ProfileNotFound: 'PANOPTES_PROFILE_NOT_FOUND',
  SchedulerInput: 'PANOPTES_SCHEDULER_INPUT',
  Closed: 'PANOPTES_CLOSED',
  HttpBadRequest: 'PANOPTES_HTTP_BAD_REQUEST',
  HttpUnauthorized: 'PANOPTES_HTTP_UNAUTHORIZED',
  HttpForbidden: 'PANOPTES_HTTP_FORBIDDEN',
  HttpTooMany: 'PANOPTES_HTTP_TOO_MANY',
  PlanNotFound: 'PANOPTES_PLAN_NOT_FOUND',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface PanoptesErrorOptions {
  retriable?: boolean;
  cause?: unknown;
  /** Context an operator needs: source, topic, key path, ... */
  details?: Record<string, unknown>;
}

export class PanoptesError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: PanoptesErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PanoptesError';
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.details = options.details ?? {};
  }
}

/** Errors cross threads, processes and the bus as plain data; `instanceof` does not survive that. */
export interface SerializedError {
  code: string;
  message: string;
  retriable: boolean;
  details?: Record<string, unknown>;
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof PanoptesError) {
    return { code: err.code, message: err.message, retriable: err.retriable, details: err.details };
  }
  if (err instanceof Error) return { code: err.name, message: err.message, retriable: false };
  return { code: 'UNKNOWN', message: String(err), retriable: false };
}

export function deserializeError(data: SerializedError): PanoptesError | Error {
  const known = Object.values(ErrorCode) as string[];
  if (known.includes(data.code)) {
    return new PanoptesError(data.code as ErrorCode, data.message, {
      retriable: data.retriable,
      ...(data.details ? { details: data.details } : {}),
    });
  }
  const err = new Error(data.message);
  err.name = data.code;
  return err;
}

/** A one-line reason for humans: the message, plus the cause's when it adds something. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? err.cause.message : undefined;
  return cause && !err.message.includes(cause) ? `${err.message}: ${cause}` : err.message;
}
