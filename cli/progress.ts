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
      if (stageChanged || Date.now() - lastLine >= 5000) write(state);
    },
    stop() {
      // The final state, unless that is what the last line said.
      if (last && lastLine > 0 && (last.stage !== written?.stage || last.frames !== written.frames)) write(last);
      last = undefined;
    },
  };
}
