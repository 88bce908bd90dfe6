// Cerbos' action and resource patterns (CERBOS-NOTES §1): `:` separates segments; `*` matches a
// run without `:`, `**` any run, a lone `*` everything; every other character is literal. A
// small two-row dynamic programme (time O(pattern × text)), never a regular expression.

export type Matcher = (text: string) => boolean;

type Token = { kind: 'char'; c: string } | { kind: 'star' } | { kind: 'any' };

function tokens(pattern: string): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '*') {
      if (pattern[i + 1] === '*') {
        out.push({ kind: 'any' });
        i++;
      } else out.push({ kind: 'star' });
    } else out.push({ kind: 'char', c: pattern[i] });
  }
  return out;
}

export function globMatcher(pattern: string): Matcher {
  if (pattern === '*') return () => true;
  if (!pattern.includes('*')) return (text) => text === pattern;
  const toks = tokens(pattern);
  return (text) => {
    // can[j]: the first i tokens match text[0..j)
    let can = new Array<boolean>(text.length + 1).fill(false);
    can[0] = true;
    for (const t of toks) {
      const next = new Array<boolean>(text.length + 1).fill(false);
      if (t.kind === 'char') {
        for (let j = 0; j < text.length; j++) if (can[j] && text[j] === t.c) next[j + 1] = true;
      } else {
        // a star extends over any run of text (not over ':' for a single star)
        for (let j = 0; j <= text.length; j++) {
          if (can[j] || (j > 0 && next[j - 1] && (t.kind === 'any' || text[j - 1] !== ':'))) next[j] = true;
        }
      }
      can = next;
    }
    return can[text.length];
  };
}

/** One matcher for a list of patterns (any of them). */
export function anyMatcher(patterns: string[]): Matcher {
  if (patterns.includes('*')) return () => true;
  const literal = new Set(patterns.filter((p) => !p.includes('*')));
  const globs = patterns.filter((p) => p.includes('*')).map(globMatcher);
  if (globs.length === 0) return (text) => literal.has(text);
  return (text) => literal.has(text) || globs.some((g) => g(text));
}
