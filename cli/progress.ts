import cliProgress from 'cli-progress';

/** Replay progress: a bar on a terminal, a plain line every few seconds otherwise. */
export interface Progress {
  update(frames: number, total: number | undefined): void;
  stop(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  const started = Date.now();
  const fps = (frames: number): string => (frames / Math.max(0.001, (Date.now() - started) / 1000)).toFixed(1);
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: 'replay |{bar}| {value}/{total} frames | {fps} fps | ETA {eta_formatted}', stream, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let startedBar = false;
    return {
      update(frames, total) {
        if (!startedBar) {
          bar.start(total ?? frames, 0, { fps: '0' });
          startedBar = true;
        }
        if (total !== undefined) bar.setTotal(Math.max(total, frames));
        bar.update(frames, { fps: fps(frames) });
      },
      stop: () => bar.stop(),
    };
  }
  let lastLine = 0;
  let last: { frames: number; total: number | undefined } | undefined;
  const write = (frames: number, total: number | undefined): void => {
    lastLine = Date.now();
    const left = total !== undefined && frames > 0 ? ((total - frames) * (Date.now() - started)) / frames / 1000 : undefined;
    stream.write(`replay: ${frames}${total !== undefined ? `/${total}` : ''} frames, ${fps(frames)} fps${left !== undefined ? `, ETA ${Math.ceil(left)} s` : ''}\n`);
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
