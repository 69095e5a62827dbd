/** Index of the CTC blank in a charset from {@link loadCharset}. */
export const CTC_BLANK_INDEX = 0;

export interface CharsetOptions {
  /** Append `' '` after the dictionary's characters (PaddleOCR's `use_space_char`, on for PP-OCR). */
  useSpaceChar?: boolean;
}

/**
 * Builds the class list of a PaddleOCR CTC recogniser from a dictionary file's text
 * (e.g. `ppocr_keys_v1.txt`), the way PaddleOCR's `CTCLabelDecode` does:
 * one character per line (a trailing newline adds no entry, `\r\n` endings are accepted),
 * then `' '` appended when `useSpaceChar`, then the blank prepended at index 0.
 *
 * The blank is returned as `''` so that emitting it by mistake adds nothing to a string.
 * With `ppocr_keys_v1.txt` the result has 6625 entries, the class count of the PP-OCRv4 model.
 */
export function loadCharset(text: string, options: CharsetOptions = {}): string[] {
  const { useSpaceChar = true } = options;
  const lines = text.split('\n');
  // Python's readlines(): a final newline ends the last line instead of starting an empty one.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const chars = lines.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
  if (useSpaceChar) chars.push(' ');
  return ['', ...chars];
}
