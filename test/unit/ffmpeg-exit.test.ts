/** What an ffmpeg run's end means, from its exit and the words it printed (ffmpeg 4's wordings, RTSP and HTTP). */
import { describe, expect, it } from 'vitest';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import { classifyExit } from '../../ingest/ffmpeg-exit.js';

const sourceError = (code: ErrorCode, what: string, details?: Record<string, unknown>): PanoptesError => new PanoptesError(code, what, { ...(details ? { details } : {}) });
const ended = (stderr: string, frames = 0): PanoptesError | undefined => classifyExit({ code: 1, signal: null }, stderr, frames, sourceError);

describe('classifyExit', () => {
  it("tells a camera that is not there, or will not serve, from footage ffmpeg cannot decode", () => {
    const cases: [string, ErrorCode, RegExp][] = [
      ['rtsp://127.0.0.1:8554/cam: Connection refused', ErrorCode.SourceUnavailable, /unavailable after 0 frames: Connection refused/],
      ['rtsp://192.0.2.10:8554/cam: No route to host', ErrorCode.SourceUnavailable, /No route to host/],
      ['[rtsp @ 0x1] method OPTIONS failed: 503 Service Unavailable\nrtsp://h/cam: Server returned 5XX Server Error reply', ErrorCode.SourceUnavailable, /Server returned 5XX/],
      ['[rtsp @ 0x1] method OPTIONS failed: 401 Unauthorized\nrtsp://h/cam: Server returned 401 Unauthorized (authorization failed)', ErrorCode.SourceUnavailable, /Server returned 401 Unauthorized \(authorization failed\)/],
      ['rtsp://h/cam: Server returned 403 Forbidden (access denied)', ErrorCode.SourceUnavailable, /403 Forbidden/],
      ['[rtsp @ 0x1] method OPTIONS failed: 404 Not Found\nrtsp://h/cam: Server returned 404 Not Found', ErrorCode.SourceNotFound, /no such file \(Server returned 404 Not Found\)/],
      ['/data/x.mp4: Invalid data found when processing input', ErrorCode.SourceDecode, /could not decode the file \(exit code 1: Invalid data found when processing input\)/],
    ];
    for (const [stderr, code, message] of cases) {
      const err = ended(stderr);
      expect(err?.code, stderr).toBe(code);
      expect(err?.message, stderr).toMatch(message);
    }
  });
});
