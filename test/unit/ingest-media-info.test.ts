import { describe, expect, it } from 'vitest';
import { mediaInfoReader } from '../../ingest/ffmpeg.js';

const read = (lines: string[]) => {
  const reader = mediaInfoReader();
  for (const line of lines) reader.onLine(line);
  return reader.info;
};

describe("the input's duration and rate from ffmpeg's lines", () => {
  it('reads them as ffmpeg 4 prints them (streams four spaces in) and as ffmpeg 6 and later do (two)', () => {
    const ffmpeg4 = ["Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'car.mp4':", '  Duration: 00:00:30.21, start: 0.000000, bitrate: 744 kb/s', '    Stream #0:0(eng): Video: h264 (Baseline), yuv420p, 768x432, 614 kb/s, 12.50 fps, 12.50 tbr, 25k tbn (default)'];
    expect(read(ffmpeg4)).toEqual({ durationMs: 30_210, fps: 12.5 });
    const ffmpeg7 = ["Input #0, mpegts, from 'a.ts':", '  Duration: 00:01:00.00, start: 1.400000, bitrate: 1000 kb/s', '  Program 1', '    Metadata:', '      service_name    : Service01', '  Stream #0:0[0x100]: Video: h264 (High) ([27][0][0][0] / 0x001B), yuv420p(progressive), 1280x720, 25 fps, 25 tbr, 90k tbn'];
    expect(read(ffmpeg7)).toEqual({ durationMs: 60_000, fps: 25 });
    expect(read(["Input #0, gif, from 'a.gif':", '  Duration: N/A, bitrate: N/A', '    Stream #0:0: Video: gif, bgra, 480x270, 12 fps, 12 tbr, 100 tbn'])).toEqual({ durationMs: undefined, fps: 12 });
  });

  it("takes no number from the footage's metadata, nor from the output's stream", () => {
    const lines = [
      "Input #0, matroska,webm, from 'lying.mkv':",
      '  Metadata:',
      '    title           : Duration: 3000:00:00.00',
      '    Stream #9:9: Video: x 999999 fps: a tag named like a stream',
      '  Duration: 00:00:01.00, start: 0.000000, bitrate: 10 kb/s',
      '    Stream #0:0: Video: mpeg4, yuv420p, 64x48, 5 fps, 5 tbr, 1k tbn',
      '    Metadata:',
      '      comment         : Stream #0:1: Video: x 999999 fps',
    ];
    expect(read(lines)).toEqual({ durationMs: 1000, fps: 5 });
    // An input stream that prints no rate (an HTTP MJPEG camera): the output's sampled rate is not taken for it.
    const noRate = ["Input #0, mpjpeg, from 'http://cam/video':", '  Duration: N/A, bitrate: N/A', '  Stream #0:0: Video: mjpeg, yuvj422p, 640x480', 'Stream mapping:', "Output #0, image2pipe, to 'pipe:':", '  Stream #0:0: Video: mjpeg, yuvj422p, 640x480, q=2-31, 1 fps, 90k tbn'];
    expect(read(noRate)).toEqual({ durationMs: undefined, fps: undefined });
  });
});
