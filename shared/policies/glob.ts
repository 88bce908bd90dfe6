// Cerbos' action and resource patterns (Cerbos 0.51; docs/policies-differential.md). A pattern
// is a glob only when it holds a `*`, as in Cerbos' rule index (internal/ruletable/index
// glob_dimension.go): `x?` or `[a]` without one is literal text and matches only itself. A glob
// has `:` as the separator (internal/util/globs_common.go): `*` matches a run without `:`, `**`
// any run, `?` one character other than `:`, `[abc]`/`[a-z]`/`[!abc]` one character of a class,
// `{a,b}` either alternative, `\` escapes; a lone `*` matches everything. Matching is a dynamic
// programme over the text (time O(pattern × text)), never a backtracking regular expression;
// alternatives expand to at most MAX_ALTERNATIVES plain patterns.

export type Matcher = (text: string) => boolean;

type Token =
  | { kind: 'char'; c: string }
  | { kind: 'one' }
  | { kind: 'class'; negated: boolean; ranges: [string, string][] }
  | { kind: 'star' }
  | { kind: 'any' };

const SEPARATOR = ':';
export const MAX_ALTERNATIVES = 64;

export class GlobError extends Error {}

/** The pattern's plain alternatives (braces expanded). */
function expand(pattern: string): string[] {
  const open = findBrace(pattern);
  if (open < 0) return [pattern];
  let depth = 0;
  const parts: string[] = [];
  let start = open + 1;
  for (let i = open; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '{') depth++;
    else if (c === '}' && --depth === 0) {
      parts.push(pattern.slice(start, i));
      const head = pattern.slice(0, open);
      const tail = pattern.slice(i + 1);
      const out: string[] = [];
      for (const p of parts) for (const e of expand(head + p + tail)) {
        out.push(e);
        if (out.length > MAX_ALTERNATIVES) throw new GlobError(`Pattern "${pattern}" has more than ${MAX_ALTERNATIVES} alternatives.`);
      }
      return out;
    } else if (c === ',' && depth === 1) {
      parts.push(pattern.slice(start, i));
      start = i + 1;
    }
  }
  throw new GlobError(`Pattern "${pattern}" has an unclosed "{".`);
}

function findBrace(pattern: string): number {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '\\') i++;
    else if (pattern[i] === '{') return i;
  }
  return -1;
}

function tokens(pattern: string): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\' && i + 1 < pattern.length) out.push({ kind: 'char', c: pattern[++i] });
    else if (c === '*') {
      if (pattern[i + 1] === '*') {
        out.push({ kind: 'any' });
        i++;
      } else out.push({ kind: 'star' });
    } else if (c === '?') out.push({ kind: 'one' });
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close < 0) throw new GlobError(`Pattern "${pattern}" has an unclosed "[".`);
      let body = pattern.slice(i + 1, close);
      const negated = body.startsWith('!');
      if (negated) body = body.slice(1);
      const ranges: [string, string][] = [];
      for (let j = 0; j < body.length; j++) {
        if (body[j + 1] === '-' && j + 2 < body.length) {
          ranges.push([body[j], body[j + 2]]);
          j += 2;
        } else ranges.push([body[j], body[j]]);
      }
      out.push({ kind: 'class', negated, ranges });
      i = close;
    } else out.push({ kind: 'char', c });
  }
  return out;
}

function single(t: Token, ch: string): boolean {
  switch (t.kind) {
    case 'char':
      return t.c === ch;
    case 'one':
      return ch !== SEPARATOR;
    case 'class':
      return t.ranges.some(([lo, hi]) => ch >= lo && ch <= hi) !== t.negated;
    default:
      return false;
  }
}

function plainMatcher(toks: Token[]): Matcher {
  return (text) => {
    // can[j]: the tokens so far match text[0..j)
    let can = new Array<boolean>(text.length + 1).fill(false);
    can[0] = true;
    for (const t of toks) {
      const next = new Array<boolean>(text.length + 1).fill(false);
      if (t.kind === 'star' || t.kind === 'any') {
        for (let j = 0; j <= text.length; j++) {
          if (can[j] || (j > 0 && next[j - 1] && (t.kind === 'any' || text[j - 1] !== SEPARATOR))) next[j] = true;
        }
      } else {
        for (let j = 0; j < text.length; j++) if (can[j] && single(t, text[j])) next[j + 1] = true;
      }
      can = next;
    }
    return can[text.length];
  };
}

const SPECIAL = /[*?[{\\]/;

/** Whether Cerbos treats the pattern as a glob (else it is literal text). */
const isGlob = (pattern: string) => pattern.includes('*');

/** A matcher of one pattern; throws GlobError for a malformed glob. */
export function globMatcher(pattern: string): Matcher {
  if (pattern === '*') return () => true;
  if (!isGlob(pattern)) return (text) => text === pattern;
  const alternatives = expand(pattern).map((p) => (SPECIAL.test(p) ? plainMatcher(tokens(p)) : (text: string) => text === p));
  return memoised((text) => text === pattern || alternatives.some((m) => m(text)));
}

const MEMO_ENTRIES = 256;
const MEMO_TEXT_LENGTH = 128;

/** A matcher that remembers its answers: checks ask about the same few actions and kinds again and again (bounded: short texts, a few hundred of them). */
function memoised(match: Matcher): Matcher {
  const memo = new Map<string, boolean>();
  return (text) => {
    let r = memo.get(text);
    if (r === undefined) {
      r = match(text);
      if (text.length <= MEMO_TEXT_LENGTH) {
        if (memo.size >= MEMO_ENTRIES) memo.clear();
        memo.set(text, r);
      }
    }
    return r;
  };
}

/** One matcher for a list of patterns (any of them; a glob also matches its own text, as Cerbos' does: `a*` matches "a*"). */
export function anyMatcher(patterns: string[]): Matcher {
  if (patterns.includes('*')) return () => true;
  const literal = new Set(patterns);
  const globs = patterns.filter(isGlob).map(globMatcher);
  if (globs.length === 0) return (text) => literal.has(text);
  return (text) => literal.has(text) || globs.some((g) => g(text));
}
