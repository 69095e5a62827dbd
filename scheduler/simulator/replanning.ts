import { DEFAULT_REPLAN_RULE } from '../epoch.js';

/**
 * When the simulated control plane re-plans (Nexus §4 "epochs", digest §1.4): every epoch
 * (30 s), and earlier when the load changed a lot, but never sooner than the minimum gap (10 s)
 * after the last plan, which keeps the plan from oscillating. Backends report their arrivals
 * every beacon (1 s, as the Nexus code does); a session's rate is the mean over the last
 * window (10 s, the Nexus code's moving average).
 *
 * The rule is the epoch service's own (`replanDue` in `../epoch.ts`); the simulator measures
 * the load in GPUs at peak throughput, Σ R/T, where the epoch service sums frame rates.
 */
export interface ReplanOptions {
  /** @defaultValue 30_000 */
  epochMs?: number;
  /** @defaultValue 10_000 */
  minEpochMs?: number;
  /** @defaultValue 1_000 */
  beaconMs?: number;
  /** @defaultValue 10_000 */
  rateWindowMs?: number;
  /** Relative change of Σ R/T that re-plans before the epoch ends. @defaultValue 0.3 */
  loadChange?: number;
  /** Memory of one device for the packer, MB. @defaultValue Infinity */
  deviceMemoryMB?: number;
}

export type ReplanSettings = Required<ReplanOptions>;

export function replanSettings(options: ReplanOptions): ReplanSettings {
  return {
    epochMs: options.epochMs ?? DEFAULT_REPLAN_RULE.epochMs,
    minEpochMs: options.minEpochMs ?? DEFAULT_REPLAN_RULE.minEpochMs,
    beaconMs: options.beaconMs ?? 1_000,
    rateWindowMs: options.rateWindowMs ?? 10_000,
    loadChange: options.loadChange ?? DEFAULT_REPLAN_RULE.loadChange,
    deviceMemoryMB: options.deviceMemoryMB ?? Infinity,
  };
}

/** Per-session arrival counts per beacon, and the mean rate over the window. */
export class RateMeter {
  readonly #slots: Float64Array[];
  readonly #beaconMs: number;
  #current = 0;
  #filled = 0;

  constructor(sessions: number, settings: ReplanSettings) {
    const slots = Math.max(1, Math.round(settings.rateWindowMs / settings.beaconMs));
    this.#slots = Array.from({ length: slots }, () => new Float64Array(sessions));
    this.#beaconMs = settings.beaconMs;
  }

  count(session: number): void {
    const slot = this.#slots[this.#current] as Float64Array;
    slot[session] = (slot[session] ?? 0) + 1;
  }

  /** Closes the current beacon and returns each session's rate over the window so far, requests/s. */
  beacon(): number[] {
    this.#filled = Math.min(this.#filled + 1, this.#slots.length);
    const seconds = (this.#filled * this.#beaconMs) / 1000;
    const sessions = (this.#slots[0] as Float64Array).length;
    const rates = Array.from({ length: sessions }, (_, s) => this.#slots.reduce((sum, slot) => sum + (slot[s] ?? 0), 0) / seconds);
    this.#current = (this.#current + 1) % this.#slots.length;
    (this.#slots[this.#current] as Float64Array).fill(0);
    return rates;
  }
}
