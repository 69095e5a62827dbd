import { ErrorCode, PanoptesError } from '../../core/index.js';

/**
 * An operator's configuration is part of an app definition, so a bad one is the app's fault:
 * it is reported as `AppInvalid` and never retried.
 */
export function invalidConfig(operator: string, message: string, details: Record<string, unknown> = {}): PanoptesError {
  return new PanoptesError(ErrorCode.AppInvalid, `${operator}: ${message}`, { details: { operator, ...details } });
}
