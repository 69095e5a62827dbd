import { pino, type Logger, type LevelWithSilent } from 'pino';
import { redact } from './redact.js';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Where JSON lines go; stderr by default so stdout stays free for command output. */
  destination?: NodeJS.WritableStream;
}

/** The one place pino is configured. Modules get `logger.child({ module })` passed in. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? (process.env.PANOPTES_LOG_LEVEL as LevelWithSilent | undefined) ?? 'info';
  // Every line passes through redact() as written, whatever a module put in it.
  return pino({ level, base: undefined, hooks: { streamWrite: redact } }, options.destination ?? process.stderr);
}

/** For tests and tools that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
