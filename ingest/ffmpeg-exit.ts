/** What an ended ffmpeg run of a source means: a clean end, or an error with the code that says why. */
import { ErrorCode, type PanoptesError } from '../core/index.js';
import type { FfmpegExit } from './ffmpeg.js';

/** Makes a source's error: the source and its path in the message, the code deciding what happens next. */
export type SourceErrorFactory = (
  code: ErrorCode,
  what: string,
  details?: Record<string, unknown>,
  cause?: unknown,
) => PanoptesError;

/** ffmpeg 4..6 and ffmpeg 7+ wordings of "this build has no decoder for that stream". */
const DECODER_MISSING = [
  /Decoder \(codec ([^)]*)\) not found/,
  /Decoding requested, but no decoder found for: (\S+)/,
];

/**
 * ffmpeg's words for a network input whose server is not there or will not serve it. Such a
 * source is unavailable (worth trying again later), not a file ffmpeg failed to decode.
 */
const UNAVAILABLE = [
  /Connection refused/i,
  /Connection timed out|Operation timed out/i,
  /No route to host|Network is unreachable/i,
  /Failed to resolve hostname|Name or service not known|Temporary failure in name resolution/i,
  /Server returned 5(\d\d|XX)/i,
  // Credentials the camera refuses are the user's to fix, but a camera is retried like any other.
  /Server returned 40[13][^\n]*/i,
  /Connection reset by peer/i,
];

/** The error an ended ffmpeg run means, or undefined for a clean end. */
export function classifyExit(
  exit: FfmpegExit,
  stderr: string,
  framesEmitted: number,
  sourceError: SourceErrorFactory,
): PanoptesError | undefined {
  const details = { code: exit.code, signal: exit.signal, stderr };
  const lastLines = stderr.split('\n').slice(-5).join('\n');
  // ffmpeg's last line usually says why ("Invalid data found when processing input").
  const why = stderr.trim().split('\n').at(-1)?.replace(/^.*?: /, '') ?? '';
  if (exit.spawnError) {
    return sourceError(ErrorCode.FfmpegExited, `ffmpeg could not start: ${exit.spawnError.message}`, details, exit.spawnError);
  }
  if (exit.inputError) {
    return sourceError(ErrorCode.FfmpegExited, `the input stream failed after ${framesEmitted} frames: ${exit.inputError.message}`, details, exit.inputError);
  }
  if (exit.code === 0) return undefined;
  if (exit.signal) {
    return sourceError(ErrorCode.FfmpegExited, `ffmpeg was killed by ${exit.signal} after ${framesEmitted} frames\n${lastLines}`, details);
  }
  for (const pattern of DECODER_MISSING) {
    const codec = pattern.exec(stderr)?.[1];
    if (codec !== undefined) {
      return sourceError(ErrorCode.SourceUnsupportedCodec, `no decoder for codec ${codec}\n${lastLines}`, { ...details, codec });
    }
  }
  // Checked before decoding: ffmpeg ends a refused connection with "Invalid data found" too.
  const unavailable = UNAVAILABLE.find((pattern) => pattern.test(stderr));
  if (unavailable) {
    const reason = unavailable.exec(stderr)?.[0] ?? 'unavailable';
    return sourceError(ErrorCode.SourceUnavailable, `unavailable after ${framesEmitted} frames: ${reason} (exit code ${exit.code})\n${lastLines}`, { ...details, reason });
  }
  if (/Server returned 40[34]|HTTP error 40[34]/i.test(stderr)) {
    return sourceError(ErrorCode.SourceNotFound, `the server has no such file (${/(?:Server returned|HTTP error) 40[34][^\n]*/i.exec(stderr)?.[0] ?? '404'})\n${lastLines}`, details);
  }
  const vast = /Picture size (\d+x\d+) exceeds specified max pixel count (\d+)/.exec(stderr);
  if (vast) return sourceError(ErrorCode.SourceDecode, `a picture of ${vast[1]} pixels, more than the ${vast[2]} a frame may have (exit code ${exit.code})`, details);
  if (framesEmitted === 0 && /Stream map '0:v:0' matches no streams/.test(stderr)) {
    return sourceError(ErrorCode.SourceDecode, `the file has no video stream (exit code ${exit.code})\n${lastLines}`, details);
  }
  if (framesEmitted === 0) {
    return sourceError(ErrorCode.SourceDecode, `ffmpeg could not decode the file (exit code ${exit.code}${why ? `: ${why}` : ''})\n${lastLines}`, details);
  }
  return sourceError(ErrorCode.FfmpegExited, `ffmpeg exited with code ${exit.code} after ${framesEmitted} frames${why ? `: ${why}` : ''}\n${lastLines}`, details);
}
