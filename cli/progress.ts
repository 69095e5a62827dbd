import cliProgress from 'cli-progress';

/** Replay progress: a bar on a terminal, a plain line every few seconds otherwise. */
export interface Progress {
  update(frames: number, total: number | undefined): void;
  stop(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  const started = Date.now();
  const fps = (frames: number): string => (frames / Math.max(0.001, (Date.now() - started) / 1000)).toFixed(1);
  const eta = (frames: number, total: number | undefined): string =>
    total === undefined || frames === 0 ? '?' : `${Math.ceil(((total - frames) * (Date.now() - started)) / frames / 1000)} s`;
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: 'replay |{bar}| {value}/{total} frames | {fps} fps | ETA {remaining}', stream, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let startedBar = false;
    return {
      update(frames, total) {
        if (!startedBar) {
          bar.start(total ?? frames, 0, { fps: '0', remaining: '?' });
          startedBar = true;
        }
        if (total !== undefined) bar.setTotal(Math.max(total, frames));
        bar.update(frames, { fps: fps(frames), remaining: eta(frames, total) });
      },
      stop: () => bar.stop(),
    };
  }
  let lastLine = 0;
  let last: { frames: number; total: number | undefined } | undefined;
  const write = (frames: number, total: number | undefined): void => {
    lastLine = Date.now();
    stream.write(`replay: ${frames}${total !== undefined ? `/${total}` : ''} frames, ${fps(frames)} fps, ETA ${eta(frames, total)}\n`);
  };
  return {
    update(frames, total) {
      last = { frames, total };
      if (Date.now() - lastLine >= 5000) write(frames, total);
    },
    stop() {
      if (last && lastLine > 0) write(last.frames, last.total);
      last = undefined;
    },
  };
}
