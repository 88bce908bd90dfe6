// The `_redirects` and `_headers` files of a frontend-worker build (Netlify / Cloudflare Pages
// syntax), parsed at deploy time into rules whose matchers are plain data (the manifest is stored
// as JSON and read back: nothing here is a function or a RegExp).
//
// Patterns (`from` of `_redirects`, the path lines of `_headers`) start with `/` and are matched
// against the percent-decoded request path (so `/caf%C3%A9` and `/café` are the same pattern):
// - `*` (splat) matches any run of characters, `/` included, possibly empty; `_redirects` allows
//   one per rule (its text is `:splat` in `to`), `_headers` several;
// - `:name` matches one whole, non-empty path segment; it must be a whole segment and come before
//   any `*` (`/blog/:year/*`), so that matching stays linear;
// - anything else is literal, case-sensitive; a trailing `/` is ignored on both sides (`/about`
//   matches `/about/`), and a pattern ending in `/*` also matches the directory itself
//   (`/blog/*` matches `/blog`).
// Matching never runs a regular expression: the part before the first `*` is matched left to
// right (a placeholder takes the segment up to the next `/`), the literal chunks between stars
// at their leftmost occurrence, the last chunk at the end: linear in path and pattern.
//
// `_redirects`: `from to [status][!]` per line; `#` comments (whole line or trailing); `to` is a
// path or, for 301/302/303/307/308 only, an absolute http(s) URL — never a proxy (200 to a URL is
// refused: no request leaves the platform on a visitor's behalf). 404 and 410 serve `to` with
// that status. Query-parameter matching and conditions (`id=:id`, `Country=…`) are refused.
// Captures are percent-encoded into the target; a path target never starts with `//` (a splat
// cannot turn `/go/* /:splat` into an open redirect to another host).
// `_headers`: a pattern line, then indented `Name: value` lines. Refused: Set-Cookie, names that
// are not HTTP tokens, values with control or non-ASCII characters, and the headers that
// describe framing, encoding or the validator the platform computes (Content-Length,
// Transfer-Encoding, Connection and other hop-by-hop headers, Content-Encoding, Content-Range,
// ETag). Content-Type may be overridden (for example for extension-less `.well-known` files);
// Vary is added to the platform's. Within one rule a repeated name is joined with `, `; across
// rules a later match replaces an earlier same-named header.
// Errors list every bad line (at most 20) under the field `file`: `_redirects line N: …`.
import { validationError } from '../errors.ts';

export const MAX_REDIRECT_RULES = 1000;
export const MAX_HEADER_RULES = 100;
const MAX_LINE_LENGTH = 2000;
const MAX_REPORTED = 20;
const REDIRECT_STATUSES = new Set([200, 301, 302, 303, 307, 308, 404, 410]);
const URL_STATUSES = new Set([301, 302, 303, 307, 308]);
const REFUSED_HEADERS = new Map([
  ['set-cookie', 'cookies are never set by static hosting'],
  ...['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade'].map(
    (h) => [h, 'it describes the connection or framing, which the platform sets'] as [string, string],
  ),
  ['content-encoding', 'the platform sets it for the compressed variant it serves'],
  ['content-range', 'the platform sets it'],
  ['etag', 'the platform derives it from the file content'],
]);

/** A literal run of the pattern, or a placeholder (`:name`, one whole segment). */
export type PatternPart = string | { name: string };

/** A compiled pattern: `head` before the first `*` (anchored at the start), the literal chunks between stars, `tail` after the last (anchored at the end). */
export interface CompiledPattern {
  head: PatternPart[];
  star: boolean;
  middle: string[];
  tail: string;
  /** Ends with `/*`: also matches the directory itself. */
  dirSplat: boolean;
}

export interface RedirectRule {
  from: string;
  to: string;
  status: number;
  force: boolean;
  matcher: CompiledPattern;
  /** `to` with its `:splat` and placeholders as parts to fill in. */
  target: PatternPart[];
}

export interface HeaderRule {
  pattern: string;
  headers: [string, string][];
  matcher: CompiledPattern;
}

interface Match {
  params: Map<string, string>;
  splat: string;
}

/** A problem on one line (caught by the parser and listed with its line number). */
class LineProblem extends Error {}
function fail(message: string): never {
  throw new LineProblem(message);
}

const isNameStart = (c: string | undefined) => c !== undefined && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_');
const isNameChar = (c: string | undefined) => isNameStart(c) || (c !== undefined && c >= '0' && c <= '9');

/** The path without one trailing `/` (the root stays `/`). */
const trimSlash = (path: string) => (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);

function compilePattern(raw: string, maxStars: number): CompiledPattern {
  if (!raw.startsWith('/')) fail(`"${raw}" must be a path starting with "/" (host names and full URLs are not supported)`);
  if (raw.includes('?')) fail(`"${raw}" has a query string: query-parameter matching is not supported`);
  let text: string;
  try {
    text = trimSlash(decodeURIComponent(raw));
  } catch {
    return fail(`"${raw}" has an invalid percent-encoding`);
  }
  const head: PatternPart[] = [];
  const middle: string[] = [];
  const names = new Set<string>();
  let stars = 0;
  let lit = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '*') {
      while (text[i + 1] === '*') i++;
      if (++stars > maxStars) fail(`"${raw}" has more than one "*": a redirect has one splat at most`);
      if (stars === 1) {
        if (lit) head.push(lit);
      } else middle.push(lit);
      lit = '';
    } else if (c === ':' && text[i - 1] === '/' && isNameStart(text[i + 1])) {
      let j = i + 1;
      while (isNameChar(text[j])) j++;
      const name = text.slice(i + 1, j);
      if (j < text.length && text[j] !== '/') fail(`":${name}" in "${raw}" must be a whole path segment (like /blog/:slug)`);
      if (stars > 0) fail(`":${name}" in "${raw}" comes after "*": placeholders must come before the splat`);
      if (name === 'splat') fail(`":splat" is the text matched by "*": name the placeholder otherwise`);
      if (names.has(name)) fail(`":${name}" appears twice in "${raw}"`);
      names.add(name);
      if (lit) head.push(lit);
      head.push({ name });
      lit = '';
      i = j - 1;
    } else lit += c;
  }
  if (stars === 0 && lit) head.push(lit);
  return { head, star: stars > 0, middle, tail: stars > 0 ? lit : '', dirSplat: text.endsWith('/*') };
}

function matchOnce(p: CompiledPattern, text: string): Match | null {
  const params = new Map<string, string>();
  let pos = 0;
  for (const part of p.head) {
    if (typeof part === 'string') {
      if (!text.startsWith(part, pos)) return null;
      pos += part.length;
    } else {
      const slash = text.indexOf('/', pos);
      const end = slash === -1 ? text.length : slash;
      if (end === pos) return null;
      params.set(part.name, text.slice(pos, end));
      pos = end;
    }
  }
  if (!p.star) return pos === text.length ? { params, splat: '' } : null;
  const splatStart = pos;
  const tailStart = text.length - p.tail.length;
  if (tailStart < pos || !text.endsWith(p.tail)) return null;
  for (const chunk of p.middle) {
    const at = text.indexOf(chunk, pos);
    if (at === -1 || at + chunk.length > tailStart) return null;
    pos = at + chunk.length;
  }
  // The splat of a redirect (one star: no middle chunks).
  return { params, splat: text.slice(splatStart, tailStart) };
}

/** Matches a decoded path (leading `/`) against a compiled pattern; linear in both. */
function matchPattern(p: CompiledPattern, path: string): Match | null {
  const text = trimSlash(path);
  return matchOnce(p, text) ?? (p.dirSplat ? matchOnce(p, `${text}/`) : null);
}

/** Percent-encodes what is not printable ASCII (the header value a Location may carry). */
function printable(text: string): string {
  let out = '';
  for (const c of text) out += c > ' ' && c <= '~' ? c : encodeURIComponent(c);
  return out;
}

/** `to` as parts: `:splat` and the placeholders of `from`; any other `:word` is literal (a port, a colon in a path). */
function compileTarget(to: string, names: Set<string>, star: boolean): PatternPart[] {
  const parts: PatternPart[] = [];
  let lit = '';
  for (let i = 0; i < to.length; i++) {
    if (to[i] === ':' && isNameStart(to[i + 1])) {
      let j = i + 1;
      while (isNameChar(to[j])) j++;
      const name = to.slice(i + 1, j);
      if (name === 'splat' && !star) fail(`"${to}" uses ":splat" but "from" has no "*"`);
      if (name === 'splat' || names.has(name)) {
        if (lit) parts.push(lit);
        parts.push({ name });
        lit = '';
        i = j - 1;
        continue;
      }
    }
    lit += to[i];
  }
  if (lit) parts.push(lit);
  return parts;
}

function parseRedirectLine(tokens: string[]): RedirectRule {
  const [from, to, statusToken] = tokens as [string, string | undefined, string | undefined];
  if (to === undefined) fail('a rule is "from to [status][!]": the target is missing');
  if (to.includes('=') && !to.startsWith('/') && !/^https?:\/\//i.test(to)) {
    fail(`"${to}" looks like a query-parameter condition, which is not supported: write "from to [status][!]"`);
  }
  if (tokens.length > 3) {
    fail(`"${tokens.slice(3).join(' ')}" after the status: query-parameter matching and conditions (Country=, Language=, Role=) are not supported; a rule is "from to [status][!]"`);
  }
  let status = 301;
  let force = false;
  if (statusToken !== undefined) {
    const m = /^(\d{3})(!?)$/.exec(statusToken);
    if (!m || !REDIRECT_STATUSES.has(Number(m[1]))) {
      fail(`"${statusToken}" is not a supported status: use 200, 301, 302, 303, 307, 308, 404 or 410, followed by "!" to force the rule`);
    }
    status = Number(m[1]);
    force = m[2] === '!';
  }
  const matcher = compilePattern(from, 1);
  if (/^https?:\/\//i.test(to)) {
    if (!URL.canParse(to)) fail(`"${to}" is not a valid URL`);
    if (!URL_STATUSES.has(status)) {
      fail(`"${to}" is an absolute URL with status ${status}: only redirects (301, 302, 303, 307, 308) may go to another site (proxying is not supported)`);
    }
  } else if (!to.startsWith('/') || to.startsWith('//')) {
    fail(`"${to}" must be a path starting with a single "/" or an absolute http(s) URL`);
  }
  const names = new Set(matcher.head.flatMap((p) => (typeof p === 'string' ? [] : [p.name])));
  return { from, to, status, force, matcher, target: compileTarget(printable(to), names, matcher.star) };
}

/** Parses the lines of a file (a BOM, blank and `#` comment lines skipped) into at most `max` rules; problems reported together. */
function parseLines<T>(file: string, text: string, max: number, parseLine: (line: string, n: number, out: T[]) => void): T[] {
  const out: T[] = [];
  const problems: string[] = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (const [i, line] of lines.entries()) {
    if (problems.length >= MAX_REPORTED) break;
    const n = i + 1;
    if (!line.trim() || line.trim().startsWith('#')) continue;
    try {
      if (line.length > MAX_LINE_LENGTH) fail(`longer than ${MAX_LINE_LENGTH} characters`);
      parseLine(line, n, out);
      if (out.length > max) {
        problems.push(`${file} line ${n}: more than ${max} rules; merge rules (a "*" splat covers many paths)`);
        break;
      }
    } catch (err) {
      if (!(err instanceof LineProblem)) throw err;
      problems.push(`${file} line ${n}: ${err.message}.`);
    }
  }
  if (problems.length) throw validationError({ file: problems });
  return out;
}

/** Parses a `_redirects` file (see the header comment); throws a 400 naming the field `file` and listing the bad lines. */
export function parseRedirects(text: string): RedirectRule[] {
  return parseLines<RedirectRule>('_redirects', text, MAX_REDIRECT_RULES, (line, _n, out) => {
    const tokens = line.trim().split(/\s+/);
    const comment = tokens.findIndex((t) => t.startsWith('#'));
    out.push(parseRedirectLine(comment === -1 ? tokens : tokens.slice(0, comment)));
  });
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Parses a `_headers` file (see the header comment); throws a 400 naming the field `file` and listing the bad lines. */
export function parseHeaders(text: string): HeaderRule[] {
  let current: HeaderRule | undefined;
  const lineOf = new Map<HeaderRule, number>();
  const rules = parseLines<HeaderRule>('_headers', text, MAX_HEADER_RULES, (line, n, out) => {
    if (!/^\s/.test(line)) {
      const pattern = line.trim();
      // Pushed before compiling: the header lines of a bad pattern are not reported as orphans.
      current = { pattern, headers: [], matcher: { head: [], star: false, middle: [], tail: '', dirSplat: false } };
      out.push(current);
      lineOf.set(current, n);
      current.matcher = compilePattern(pattern, Infinity);
      return;
    }
    if (!current) fail('a header line comes before any path pattern (a pattern line starts with "/", header lines are indented)');
    if (line.trim().startsWith('!')) fail('detaching headers ("! Name") is not supported');
    const colon = line.indexOf(':');
    if (colon === -1) fail(`"${line.trim()}" is not a "Name: value" header line`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (!TOKEN.test(name)) fail(`"${name}" is not a valid header name (letters, digits and !#$%&'*+.^_\`|~- only)`);
    const refused = REFUSED_HEADERS.get(name.toLowerCase());
    if (refused) fail(`${name} cannot be set: ${refused}`);
    if (!value) fail(`${name} has no value`);
    if (!/^[\t\x20-\x7e]*$/.test(value)) fail(`the value of ${name} has control or non-ASCII characters (percent-encode them)`);
    const same = current.headers.find(([h]) => h.toLowerCase() === name.toLowerCase());
    if (same) same[1] = `${same[1]}, ${value}`;
    else current.headers.push([name, value]);
  });
  const empty = rules.filter((r) => !r.headers.length).slice(0, MAX_REPORTED);
  if (empty.length) {
    throw validationError({ file: empty.map((r) => `_headers line ${lineOf.get(r)}: "${r.pattern}" has no header lines under it (indent its "Name: value" lines).`) });
  }
  return rules;
}

/** The first rule whose `from` matches the decoded path, and its target (percent-encoded, captures filled in). */
export function matchRedirect(rules: RedirectRule[], path: string): { rule: RedirectRule; target: string } | null {
  for (const rule of rules) {
    const m = matchPattern(rule.matcher, path);
    if (!m) continue;
    let target = '';
    for (const part of rule.target) {
      if (typeof part === 'string') target += part;
      else target += (part.name === 'splat' ? m.splat : m.params.get(part.name)!).split('/').map(encodeURIComponent).join('/');
    }
    if (target.startsWith('/')) target = `/${target.replace(/^\/+/, '')}`;
    return { rule, target };
  }
  return null;
}

/** The headers of every rule matching the decoded path, in order; a later rule replaces an earlier same-named (case-insensitive) header. */
export function matchHeaders(rules: HeaderRule[], path: string): [string, string][] {
  const out = new Map<string, [string, string]>();
  for (const rule of rules) {
    if (!matchPattern(rule.matcher, path)) continue;
    for (const [name, value] of rule.headers) out.set(name.toLowerCase(), [name, value]);
  }
  return [...out.values()];
}
