/** What a classifier cache's node has served to one stream: requests, and per layer that answered its hits and the sampled ones checked against the model. */
export interface LayerFigures {
  hits: number;
  checked: number;
  checkedRight: number;
}

export interface StreamFigures {
  frames: number;
  lastSeenMs: number;
  layers: Map<string, LayerFigures>;
}

/** A stream that sent nothing for this long is forgotten (a source removed, a camera gone). */
const IDLE_STREAM_MS = 10 * 60_000;

export interface StreamFigureBook {
  /** Counts a request of stream `key` served at `now`; undefined for a request of no stream (''). */
  served(key: string, now: number): StreamFigures | undefined;
  /** A stream's figures for the layer `at`, started at zero. */
  layer(figures: StreamFigures, at: string): LayerFigures;
  /** The streams seen lately; those idle for long are forgotten. */
  current(now: number): [string, StreamFigures][];
  clear(): void;
}

export function createStreamFigureBook(): StreamFigureBook {
  const streams = new Map<string, StreamFigures>();
  return {
    served(key, now) {
      if (key === '') return undefined;
      let figures = streams.get(key);
      if (!figures) streams.set(key, (figures = { frames: 0, lastSeenMs: now, layers: new Map() }));
      figures.lastSeenMs = now;
      figures.frames += 1;
      return figures;
    },
    layer(figures, at) {
      let layer = figures.layers.get(at);
      if (!layer) figures.layers.set(at, (layer = { hits: 0, checked: 0, checkedRight: 0 }));
      return layer;
    },
    current(now) {
      for (const [key, figures] of streams) if (now - figures.lastSeenMs >= IDLE_STREAM_MS) streams.delete(key);
      return [...streams];
    },
    clear: () => streams.clear(),
  };
}
