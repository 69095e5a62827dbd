import cliProgress from 'cli-progress';

/** Where a replay stands. */
export interface ProgressState {
  /** What it does now: `starting`, `rendering footage`, `loading models`, `replaying`, `flushing results`. */
  stage: string;
  /** Frames analyzed (or published, where the models run elsewhere). */
  frames: number;
  /** Frames in all, once every source's length is known. */
  total: number | undefined;
  sources: number;
}

/** Replay progress: a bar on a terminal, a plain line every few seconds otherwise. */
export interface Progress {
  update(state: ProgressState): void;
  stop(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  // Rates count from the first frame: starting, rendering and loading models are not replaying.
  let firstFrameAt: number | undefined;
  // A rate over less than a second says little: 0 (shown as such, and no ETA) until then.
  const rate = (frames: number): number => (firstFrameAt === undefined || Date.now() - firstFrameAt < 1000 ? 0 : frames / ((Date.now() - firstFrameAt) / 1000));
  const eta = ({ frames, total }: ProgressState): string => {
    const fps = rate(frames);
    return total === undefined || fps === 0 ? '?' : `${Math.ceil(Math.max(0, total - frames) / fps)} s`;
  };
  const note = (state: ProgressState): void => {
    if (firstFrameAt === undefined && state.frames > 0) firstFrameAt = Date.now();
  };
  const sources = (n: number): string => `${n} source${n === 1 ? '' : 's'}`;

  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: '{stage} |{bar}| {value}/{totalText} frames | {sources} | {fps} fps | ETA {remaining}', stream, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(state) {
        note(state);
        const payload = { stage: state.stage.padEnd(16), totalText: state.total ?? '?', sources: sources(state.sources), fps: rate(state.frames).toFixed(1), remaining: eta(state) };
        if (!started) {
          bar.start(Math.max(1, state.total ?? state.frames), state.frames, payload);
          started = true;
        }
        bar.setTotal(Math.max(1, state.total ?? state.frames, state.frames));
        bar.update(state.frames, payload);
      },
      stop: () => bar.stop(),
    };
  }
  let lastLine = 0;
  let last: ProgressState | undefined;
  let written: ProgressState | undefined;
  const write = (state: ProgressState): void => {
    lastLine = Date.now();
    written = state;
    stream.write(`${state.stage}: ${state.frames}${state.total !== undefined ? `/${state.total}` : ''} frames from ${sources(state.sources)}, ${rate(state.frames).toFixed(1)} fps, ETA ${eta(state)}\n`);
  };
  return {
    update(state) {
      note(state);
      const stageChanged = last !== undefined && last.stage !== state.stage;
      last = state;
      // Nothing new is not said again: a service waiting for sources stays quiet.
      const changed = state.stage !== written?.stage || state.frames !== written.frames;
      if (stageChanged || (changed && Date.now() - lastLine >= 5000)) write(state);
    },
    stop() {
      // The final state, unless that is what the last line said.
      if (last && lastLine > 0 && (last.stage !== written?.stage || last.frames !== written.frames)) write(last);
      last = undefined;
    },
  };
}

/** How often roles without ingest say what they did. */
export const STATUS_EVERY_MS = 10_000;

/** One line of what the roles here did since the last line: frames analyzed, rows stored, the plan's epoch; or that they wait. */
export function statusLines(roles: { backend?: () => { frames: number; drops: number }; sink?: () => { rowsInserted: number }; scheduler?: () => { epoch: number; backends: string[] } }) {
  let before = { frames: 0, drops: 0, rows: 0, epoch: 0 };
  return {
    line(): string {
      const now = { frames: roles.backend?.().frames ?? 0, drops: roles.backend?.().drops ?? 0, rows: roles.sink?.().rowsInserted ?? 0, epoch: roles.scheduler?.().epoch ?? 0 };
      const parts = [
        ...(roles.backend ? [`backend: ${now.frames} frames (+${now.frames - before.frames}), ${now.drops} drops (+${now.drops - before.drops})`] : []),
        ...(roles.sink ? [`sink: ${now.rows} rows (+${now.rows - before.rows})`] : []),
        ...(roles.scheduler ? [`scheduler: epoch ${now.epoch}, ${roles.scheduler().backends.length} backends`] : []),
      ];
      const idle = now.frames === before.frames && now.rows === before.rows && now.epoch === before.epoch;
      before = now;
      return `${parts.join('; ')}${idle ? ` — idle for ${STATUS_EVERY_MS / 1000} s, waiting for work` : ''}`;
    },
  };
}
