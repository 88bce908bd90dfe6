// Glob patterns over object keys (`platform object rm 'logs/*.txt'`): `*`, `?` and `[…]` within
// one segment, `**` for any number of segments. No regular expression is built from a pattern.

/** One segment of a glob: `*` (any run), `?` (one character), `[a-z]` / `[!a-z]`, `\x` (x itself). */
type Token = { any: true } | { one: (c: string) => boolean };

function segmentTokens(segment: string): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c === '*') {
      if (!(tokens.at(-1) as { any?: true } | undefined)?.any) tokens.push({ any: true });
    } else if (c === '?') tokens.push({ one: () => true });
    else if (c === '[') {
      const close = segment.indexOf(']', i + 2);
      if (close < 0) {
        tokens.push({ one: (x) => x === '[' });
        continue;
      }
      let body = segment.slice(i + 1, close);
      const negate = body[0] === '!' || body[0] === '^';
      if (negate) body = body.slice(1);
      const ranges: [string, string][] = [];
      for (let j = 0; j < body.length; j++) {
        if (body[j + 1] === '-' && j + 2 < body.length) {
          ranges.push([body[j]!, body[j + 2]!]);
          j += 2;
        } else ranges.push([body[j]!, body[j]!]);
      }
      tokens.push({ one: (x) => ranges.some(([lo, hi]) => x >= lo && x <= hi) !== negate });
      i = close;
    } else {
      const literal = c === '\\' && i + 1 < segment.length ? segment[++i]! : c;
      tokens.push({ one: (x) => x === literal });
    }
  }
  return tokens;
}

/**
 * Whether a segment matches: the classic wildcard walk with one resume point per `*`, which
 * never goes back further than the last star, so at most O(segment × pattern) steps.
 */
function segmentMatches(tokens: Token[], text: string): boolean {
  const chars = [...text];
  let t = 0;
  let c = 0;
  let star = -1;
  let resume = 0;
  while (c < chars.length) {
    const token = tokens[t];
    if (token && 'one' in token && token.one(chars[c]!)) {
      t++;
      c++;
    } else if (token && 'any' in token) {
      star = t++;
      resume = c;
    } else if (star >= 0) {
      t = star + 1;
      c = ++resume;
    } else return false;
  }
  while (t < tokens.length && 'any' in tokens[t]!) t++;
  return t === tokens.length;
}

/**
 * A matcher for object keys: `*`, `?` and `[…]` within one segment (never across a `/`), `**`
 * as a whole segment for any number of segments (`logs/**` matches everything under logs/).
 * No regular expression is built from the pattern; matching a key is polynomial (segments ×
 * segments, each in O(length × pattern)), whatever the pattern.
 */
export function globMatcher(pattern: string): (key: string) => boolean {
  const parts = pattern.split('/').filter((s) => s !== '').map((s) => (s === '**' ? ('**' as const) : segmentTokens(s)));
  return (key) => {
    const segments = key.split('/').filter((s) => s !== '');
    const memo = new Map<number, boolean>();
    const match = (p: number, s: number): boolean => {
      const id = p * (segments.length + 1) + s;
      const known = memo.get(id);
      if (known !== undefined) return known;
      let ok: boolean;
      if (p === parts.length) ok = s === segments.length;
      else if (parts[p] === '**') ok = match(p + 1, s) || (s < segments.length && match(p, s + 1));
      else ok = s < segments.length && segmentMatches(parts[p] as Token[], segments[s]!) && match(p + 1, s + 1);
      memo.set(id, ok);
      return ok;
    };
    return match(0, 0);
  };
}

/** The literal start of a pattern (before its first wildcard): the list's `prefix`. */
export function literalPrefix(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' || c === '?' || c === '[') break;
    if (c === '\\' && i + 1 < pattern.length) out += pattern[++i];
    else out += c;
  }
  return out;
}
