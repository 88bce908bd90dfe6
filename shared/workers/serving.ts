// How a frontend worker answers a request: a pure decision over the active build's manifest (the
// request-time middleware streams the blob this plan names and sets exactly `headers`). This is
// the contract documented for users:
//
// Methods: GET and HEAD (HEAD: the same plan, `head: true`); others 405 with `Allow: GET, HEAD`.
// Path: the URL path (no query), percent-decoded once; 400 when the encoding is invalid or the
// decoded path holds NUL, `\` or a `..` segment. `/` serves `index.html`, `/dir/` serves
// `dir/index.html`, `/about` serves `about`, else `about.html`, else `about/index.html` — directly,
// without a redirect.
// Order: 1) forced `_redirects` rules (`!`), first match; 2) the file the path names; 3) the other
// `_redirects` rules, first match: a 3xx redirects (Location = the target), a 200 serves the
// target's file (resolved as above, one level: the target is not matched against rules again),
// 404 and 410 serve it with that status; a rewrite whose target has no file gives the 404 of
// steps 5–6 (an empty 410 for a 410 rule); 4) with `spa`, a path whose last segment has no
// extension (no `.` but a leading or trailing one) serves `index.html` with 200; 5) `404.html`
// with 404; 6) an empty 404.
// `_redirects` and `_headers` at the root of a build are rules, not files: they are not served.
// Headers of a served file: Content-Type (`; charset=utf-8` added to text types without one),
// Content-Length and Content-Encoding of the variant sent, `Vary: Accept-Encoding` when the file
// has a compressed variant, `X-Content-Type-Options: nosniff`, and for a 200 a strong ETag
// (`"<first 32 hex of the SHA-256>"`, `-br`/`-gz` inside the quotes for a compressed variant).
// Cache-Control: `no-cache` for HTML and for any non-200; `public, max-age=31536000, immutable`
// for a hashed asset (see isHashedAsset); `public, max-age=0, must-revalidate` otherwise. Then the
// `_headers` rules matching the request path (not the rewritten one) apply, a later rule
// replacing a same-named header (Vary is added to, not replaced). A preview build always sends
// `X-Robots-Tag: noindex`, whatever `_headers` says.
// Encoding: Accept-Encoding is parsed with q-values (`*` included); br or gzip is sent when that
// variant exists and its q is above 0, the higher q winning and br on a tie; identity otherwise.
// If-None-Match (a list, `*`, weak comparison) matching the ETag of the variant that would be
// sent gives a 304 with ETag, Cache-Control, Vary and X-Robots-Tag (those sent). Conditional
// requests are evaluated only for a 200.
// Redirects and empty answers carry no `_headers` (they serve no file): a redirect has Location
// and `Cache-Control: public, max-age=0, must-revalidate`; an empty answer a plain-text message
// (`message`, with its Content-Type and Content-Length) and `Cache-Control: no-cache`.
// The query string is not seen here: the middleware decides whether to carry it to a Location.
import { validationError } from '../errors.ts';
import { matchHeaders, matchRedirect, parseHeaders, parseRedirects, type HeaderRule, type RedirectRule } from './rules.ts';

export interface BuildFile {
  sha256: string;
  size: number;
  type: string;
  /** Sizes of the stored precompressed variants. */
  br?: number;
  gz?: number;
}

/** `files` keys are paths without the leading slash (`index.html`, `assets/app-3f9a1b2c.js`). */
export interface Manifest {
  files: Record<string, BuildFile>;
  redirects: RedirectRule[];
  headers: HeaderRule[];
}

export interface ServeRequest {
  method: string;
  /** The raw URL path, percent-encoded, without the query string. */
  path: string;
  acceptEncoding?: string;
  ifNoneMatch?: string;
}

export interface ServeOptions {
  spa: boolean;
  preview: boolean;
}

export type ServePlan =
  | { kind: 'file'; status: 200 | 404 | 410; file: BuildFile; encoding: 'br' | 'gzip' | null; headers: Record<string, string>; head: boolean }
  | { kind: 'not-modified'; headers: Record<string, string> }
  | { kind: 'redirect'; status: number; location: string; headers: Record<string, string> }
  | { kind: 'empty'; status: 404 | 405 | 410 | 400; headers: Record<string, string>; message: string };

const RULE_FILES = new Set(['_redirects', '_headers']);
const IMMUTABLE = 'public, max-age=31536000, immutable';
const REVALIDATE = 'public, max-age=0, must-revalidate';

/** A build path the manifest can hold: relative, `/`-separated, no empty, `.` or `..` segment, no NUL or `\`. */
function validKey(key: string): boolean {
  return key !== '' && !key.includes('\0') && !key.includes('\\') && key.split('/').every((s) => s !== '' && s !== '.' && s !== '..');
}

/**
 * Deploy time: the manifest of a build. `files` are its paths (no leading slash) and what was
 * stored for each; the root `_redirects` and `_headers` are left out of the files (they are not
 * served) and their texts, given in `texts`, parsed (a 400 naming `file` lists their bad lines).
 */
export function buildManifest(files: Map<string, BuildFile>, texts: { redirects?: string; headers?: string }): Manifest {
  const bad = [...files.keys()].filter((k) => !validKey(k));
  if (bad.length) {
    throw validationError({ files: bad.slice(0, 20).map((k) => `"${k.slice(0, 200)}" is not a build path: relative, "/"-separated, no empty, "." or ".." segment, no NUL or "\\".`) });
  }
  const out: Record<string, BuildFile> = {};
  for (const [key, file] of files) {
    if (!RULE_FILES.has(key)) Object.defineProperty(out, key, { value: file, enumerable: true, writable: true, configurable: true });
  }
  return {
    files: out,
    redirects: texts.redirects === undefined ? [] : parseRedirects(texts.redirects),
    headers: texts.headers === undefined ? [] : parseHeaders(texts.headers),
  };
}

/** The file of a build path, own keys only (a path named `constructor` is not Object's). */
const fileAt = (files: Record<string, BuildFile>, key: string): [string, BuildFile] | null =>
  Object.hasOwn(files, key) ? [key, files[key]!] : null;

/** The percent-decoded path, or null when it cannot name a file (bad encoding, NUL, `\`, a `..` segment). */
function decodePath(raw: string): string | null {
  if (!raw.startsWith('/')) return null;
  let path: string;
  try {
    path = decodeURIComponent(raw);
  } catch {
    return null;
  }
  if (path.includes('\0') || path.includes('\\') || path.split('/').includes('..')) return null;
  return path;
}

/** The file a decoded path names: `/` and `dir/` → index.html; `x` → x, x.html, x/index.html. */
function resolve(files: Record<string, BuildFile>, path: string): [string, BuildFile] | null {
  const key = path.slice(1);
  if (key === '' || key.endsWith('/')) return fileAt(files, `${key}index.html`);
  return fileAt(files, key) ?? fileAt(files, `${key}.html`) ?? fileAt(files, `${key}/index.html`);
}

const isDigit = (c: string) => c >= '0' && c <= '9';
const isLetter = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
const isHashChar = (c: string) => isDigit(c) || isLetter(c) || c === '_' || c === '-';
const isHash = (s: string) => [...s].every(isHashChar) && [...s].some(isDigit) && [...s].some(isLetter);

/**
 * Whether a build path is a content-hashed asset (cached for a year, immutable): its file name is
 * `<name><- or .><hash>.<ext>` where the hash is either the whole text after the last `-`/`.`,
 * 8+ characters of [A-Za-z0-9_] (webpack, hex), or exactly 8 characters of [A-Za-z0-9_-] (Vite's
 * base64url hashes may hold a `-`); the hash holds a digit and a letter (so dated names like
 * `report-20240101.pdf` and words like `component-name1` are not taken for hashes).
 */
export function isHashedAsset(key: string): boolean {
  const name = key.slice(key.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  if (dot <= 0 || dot === name.length - 1 || ![...name.slice(dot + 1)].every((c) => isDigit(c) || isLetter(c))) return false;
  const stem = name.slice(0, dot);
  const sep = Math.max(stem.lastIndexOf('-'), stem.lastIndexOf('.'));
  const last = stem.slice(sep + 1);
  if (sep > 0 && last.length >= 8 && !last.includes('-') && isHash(last)) return true;
  const tail = stem.slice(-8);
  const before = stem[stem.length - 9];
  return stem.length > 9 && (before === '-' || before === '.') && isHash(tail);
}

const TEXT_TYPES = new Set(['application/javascript', 'application/json', 'application/xml', 'application/manifest+json', 'image/svg+xml']);
const isHtml = (type: string) => ['text/html', 'application/xhtml+xml'].includes(type.split(';')[0]!.trim().toLowerCase());

function contentType(type: string): string {
  const base = type.split(';')[0]!.trim().toLowerCase();
  const text = base.startsWith('text/') || TEXT_TYPES.has(base);
  return text && !type.toLowerCase().includes('charset=') ? `${type}; charset=utf-8` : type;
}

/** q-values of an Accept-Encoding header by coding (lower case); entries with a bad q are ignored. */
function acceptedEncodings(header: string): Map<string, number> {
  const q = new Map<string, number>();
  for (const entry of header.split(',')) {
    const [coding, ...params] = entry.split(';').map((s) => s.trim().toLowerCase());
    if (!coding || q.has(coding)) continue;
    const qParam = params.find((p) => p.startsWith('q='));
    const value = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (Number.isFinite(value) && value >= 0 && value <= 1 && qParam !== 'q=') q.set(coding, value);
  }
  return q;
}

function negotiate(header: string | undefined, file: BuildFile): 'br' | 'gzip' | null {
  if (!header || (file.br === undefined && file.gz === undefined)) return null;
  const q = acceptedEncodings(header);
  const qOf = (...codings: string[]) => codings.map((c) => q.get(c)).find((v) => v !== undefined) ?? q.get('*') ?? 0;
  const br = file.br === undefined ? 0 : qOf('br');
  const gzip = file.gz === undefined ? 0 : qOf('gzip', 'x-gzip');
  if (br > 0 && br >= gzip) return 'br';
  return gzip > 0 ? 'gzip' : null;
}

/** Weak comparison of an If-None-Match list (or `*`) with an ETag. */
function noneMatch(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  let i = 0;
  while (i < header.length) {
    while (header[i] === ' ' || header[i] === ',' || header[i] === '\t') i++;
    if (header.startsWith('W/', i)) i += 2;
    if (header[i] !== '"') {
      const comma = header.indexOf(',', i);
      if (comma === -1) return false;
      i = comma;
      continue;
    }
    const end = header.indexOf('"', i + 1);
    if (end === -1) return false;
    if (header.slice(i, end + 1) === etag) return true;
    i = end + 1;
  }
  return false;
}

/** Headers by lower-case name, keeping the first spelling (ours or the user's). */
class HeaderSet {
  private readonly map = new Map<string, [string, string]>();
  set(name: string, value: string): void {
    const key = name.toLowerCase();
    this.map.set(key, [this.map.get(key)?.[0] ?? name, value]);
  }
  get(name: string): string | undefined {
    return this.map.get(name.toLowerCase())?.[1];
  }
  pick(...names: string[]): Record<string, string> {
    return Object.fromEntries(names.map((n) => this.map.get(n.toLowerCase())).filter((e) => e !== undefined));
  }
  all(): Record<string, string> {
    return Object.fromEntries(this.map.values());
  }
}

function empty(status: 400 | 404 | 405 | 410, message: string, options: { preview: boolean }, extra: Record<string, string> = {}): ServePlan {
  const headers: Record<string, string> = {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(message)),
    'Cache-Control': 'no-cache',
    'X-Content-Type-Options': 'nosniff',
    ...extra,
  };
  if (options.preview) headers['X-Robots-Tag'] = 'noindex';
  return { kind: 'empty', status, headers, message };
}

interface Context {
  manifest: Manifest;
  req: ServeRequest;
  options: ServeOptions;
  path: string;
}

function serveFile(ctx: Context, [key, file]: [string, BuildFile], status: 200 | 404 | 410): ServePlan {
  const encoding = negotiate(ctx.req.acceptEncoding, file);
  const h = new HeaderSet();
  h.set('Content-Type', contentType(file.type));
  h.set('Content-Length', String(encoding === 'br' ? file.br : encoding === 'gzip' ? file.gz : file.size));
  if (encoding) h.set('Content-Encoding', encoding);
  const etag = `"${file.sha256.slice(0, 32)}${encoding === 'br' ? '-br' : encoding === 'gzip' ? '-gz' : ''}"`;
  if (status === 200) h.set('ETag', etag);
  if (file.br !== undefined || file.gz !== undefined) h.set('Vary', 'Accept-Encoding');
  h.set('Cache-Control', status !== 200 || isHtml(file.type) ? 'no-cache' : isHashedAsset(key) ? IMMUTABLE : REVALIDATE);
  h.set('X-Content-Type-Options', 'nosniff');
  for (const [name, value] of matchHeaders(ctx.manifest.headers, ctx.path)) {
    const vary = h.get('Vary');
    h.set(name, name.toLowerCase() === 'vary' && vary ? `${vary}, ${value}` : value);
  }
  if (ctx.options.preview) h.set('X-Robots-Tag', 'noindex');
  if (status === 200 && ctx.req.ifNoneMatch !== undefined && noneMatch(ctx.req.ifNoneMatch, etag)) {
    return { kind: 'not-modified', headers: h.pick('ETag', 'Cache-Control', 'Vary', 'X-Robots-Tag') };
  }
  return { kind: 'file', status, file, encoding, headers: h.all(), head: ctx.req.method === 'HEAD' };
}

/** Steps 4–6: the SPA's index.html (when `spa`), else 404.html, else an empty 404. */
function notFound(ctx: Context, spa: boolean): ServePlan {
  const last = ctx.path.slice(ctx.path.lastIndexOf('/') + 1);
  const index = spa && !last.slice(1, -1).includes('.') ? fileAt(ctx.manifest.files, 'index.html') : null;
  if (index) return serveFile(ctx, index, 200);
  const page = fileAt(ctx.manifest.files, '404.html');
  if (page) return serveFile(ctx, page, 404);
  return empty(404, 'Not found.', ctx.options);
}

function applyRule(ctx: Context, rule: RedirectRule, target: string): ServePlan {
  if (rule.status >= 300 && rule.status < 400) {
    const headers: Record<string, string> = { Location: target, 'Cache-Control': REVALIDATE };
    if (ctx.options.preview) headers['X-Robots-Tag'] = 'noindex';
    return { kind: 'redirect', status: rule.status, location: target, headers };
  }
  const cut = [target.indexOf('?'), target.indexOf('#')].filter((i) => i >= 0);
  const path = decodePath(cut.length ? target.slice(0, Math.min(...cut)) : target);
  const file = path === null ? null : resolve(ctx.manifest.files, path);
  const status = rule.status as 200 | 404 | 410;
  if (file) return serveFile(ctx, file, status);
  return status === 410 ? empty(410, 'Gone.', ctx.options) : notFound(ctx, false);
}

/** The answer to a request for the active build `manifest` (see the header comment). */
export function plan(manifest: Manifest, req: ServeRequest, options: ServeOptions): ServePlan {
  if (req.method !== 'GET' && req.method !== 'HEAD') return empty(405, 'Method not allowed: use GET or HEAD.', options, { Allow: 'GET, HEAD' });
  const path = decodePath(req.path);
  if (path === null) return empty(400, 'Bad request: the path is not a valid file path.', options);
  const ctx: Context = { manifest, req, options, path };
  const forced = matchRedirect(manifest.redirects.filter((r) => r.force), path);
  if (forced) return applyRule(ctx, forced.rule, forced.target);
  const file = resolve(manifest.files, path);
  if (file) return serveFile(ctx, file, 200);
  const rule = matchRedirect(manifest.redirects.filter((r) => !r.force), path);
  if (rule) return applyRule(ctx, rule.rule, rule.target);
  return notFound(ctx, options.spa);
}

/**
 * The answer of a worker with no active build: 405 for methods other than GET and HEAD, else an
 * empty 404 saying so, never cached (it changes on the first activation) and never indexed.
 */
export function planWithoutBuild(req: ServeRequest): ServePlan {
  if (req.method !== 'GET' && req.method !== 'HEAD') return empty(405, 'Method not allowed: use GET or HEAD.', { preview: true }, { Allow: 'GET, HEAD' });
  return empty(404, 'No build is active for this site yet: deploy a build and activate it.', { preview: true }, { 'Cache-Control': 'no-store' });
}
