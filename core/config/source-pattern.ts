/**
 * An id against an app's source pattern, where `*` stands for any run of characters and every
 * other character for itself. Each part between stars is taken at its first place after the one
 * before, which is time linear in the id (a regular expression of many `.*` backtracked for
 * minutes on a long id).
 */
export function matchesId(pattern: string, id: string): boolean {
  const parts = pattern.split('*');
  const first = parts[0]!;
  const last = parts.at(-1)!;
  if (parts.length === 1) return id === pattern;
  if (id.length < first.length + last.length || !id.startsWith(first) || !id.endsWith(last)) return false;
  const end = id.length - last.length;
  let at = first.length;
  for (const part of parts.slice(1, -1)) {
    const found = id.indexOf(part, at);
    if (found < 0 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}
