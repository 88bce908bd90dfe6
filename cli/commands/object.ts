// `platform object …`: the objects of a storage bucket (/api/apps/{app}/storage/buckets/{bucket}/objects/…).
// Uploads and downloads are streams in both transports: a file is never read whole into memory.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline as pipe, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { normalizeKey } from '../../shared/storage/keys.ts';
import type { ObjectView } from '../../shared/storage/object.service.ts';
import { path as apiPath, type Api } from '../api.ts';
import { ApiCommand, operation } from '../base.ts';
import { errorLine, keyValues, pageTable, table, when, type Column } from '../output.ts';
import { pageFlags, parseJson, siteFlag } from '../flags.ts';
import { bytes, plural, Progress, recordQuery, watch } from '../tables.ts';
import { appFlag, bucketsPath } from './bucket.ts';

const bucketFlag = Flags.string({ char: 'b', summary: 'The bucket (slug).', required: true });
const objectFlags = { site: siteFlag, app: appFlag, bucket: bucketFlag };
type ObjectFlags = { site: string; app: string; bucket: string };

/** A bucket slug as one path segment (`.` and `..` would be resolved away by the URL). */
function bucketSegment(bucket: string, flag = 'bucket'): string {
  if (bucket === '.' || bucket === '..' || bucket === '') throw fieldError(flag, `Invalid bucket ${JSON.stringify(bucket)}.`);
  return apiPath`${bucket}/`;
}
const objectsPath = (f: ObjectFlags, rest = '') => bucketsPath(f.app, bucketSegment(f.bucket)) + 'objects/' + rest;
/** The key's segments encoded, its slashes kept: `objects/a/b%20c.txt`. */
const keyPath = (key: string) => key.split('/').map(encodeURIComponent).join('/');

/**
 * A key checked as the API checks it (the same message), before it is put in a URL: a `..`
 * segment would otherwise be resolved away by the URL and the request reach another route.
 */
const checkedKey = (raw: string, field: string) => normalizeKey(raw, field);

interface StorageBody<T = undefined> {
  success: boolean;
  message: string;
  status_code: number;
  data: T;
}

// ---- globs ----------------------------------------------------------------------------------

/** Whether an argument is a glob pattern (`*`, `?`, `[…]`; `{a,b}` for local files). */
const isPattern = (s: string, braces = false) => /[*?[]/.test(s) || (braces && /[{}]/.test(s));

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
function literalPrefix(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' || c === '?' || c === '[') break;
    if (c === '\\' && i + 1 < pattern.length) out += pattern[++i];
    else out += c;
  }
  return out;
}

// ---- upload -----------------------------------------------------------------------------------

/** Content types by extension (the API sniffs the bytes anyway; this is what is declared). */
const TYPES: Record<string, string> = {
  txt: 'text/plain', log: 'text/plain', md: 'text/markdown', csv: 'text/csv', tsv: 'text/tab-separated-values', html: 'text/html', htm: 'text/html', css: 'text/css',
  js: 'text/javascript', mjs: 'text/javascript', json: 'application/json', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml', ico: 'image/x-icon', bmp: 'image/bmp', tif: 'image/tiff', tiff: 'image/tiff', avif: 'image/avif', heic: 'image/heic',
  mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', flac: 'audio/flac', m4a: 'audio/mp4',
  mp4: 'video/mp4', webm: 'video/webm', mov: 'video/quicktime', avi: 'video/x-msvideo', mkv: 'video/x-matroska',
  pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip', tar: 'application/x-tar', '7z': 'application/x-7z-compressed',
  doc: 'application/msword', docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel', xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  ppt: 'application/vnd.ms-powerpoint', pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  odt: 'application/vnd.oasis.opendocument.text', ods: 'application/vnd.oasis.opendocument.spreadsheet', odp: 'application/vnd.oasis.opendocument.presentation',
  woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', otf: 'font/otf', wasm: 'application/wasm',
};
export const contentTypeOf = (file: string): string => TYPES[path.extname(file).slice(1).toLowerCase()] ?? 'application/octet-stream';

/** RFC 9110 token characters (a header name). */
const isToken = (s: string) => s.length > 0 && [...s].every((c) => /[A-Za-z0-9!#$%&'*+.^_`|~-]/.test(c));

/** `--metadata '{"author":"Ada"}'` → `X-Metadata-author: Ada` (the API lower-cases the names). */
function metadataHeaders(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  const value = parseJson(text, 'metadata');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw fieldError('metadata', 'Expected a JSON object.');
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(value)) {
    if (!isToken(name)) throw fieldError('metadata', `The name ${JSON.stringify(name)} cannot be sent as a header: use letters, digits and - _ . only.`);
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    // eslint-disable-next-line no-control-regex
    if (/[^\x20-\x7e\t]/.test(text)) throw fieldError('metadata', `The value of "${name}" cannot be sent as a header: printable ASCII only.`);
    headers[`X-Metadata-${name}`] = text;
  }
  return headers;
}

interface Planned {
  file: string;
  key: string;
  size: number;
}

/** The regular files under `dir`, in name order, as paths relative to it (symbolic links to directories are not followed). */
function walk(dir: string, rel = ''): string[] {
  const out: string[] = [];
  const entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const child = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(dir, child));
    else if (e.isFile() || (e.isSymbolicLink() && fs.statSync(path.join(dir, child), { throwIfNoEntry: false })?.isFile())) out.push(child);
  }
  return out;
}

/** The literal directory a local glob starts from (its segments before the first with a wildcard). */
function globBase(pattern: string): string {
  const segments = pattern.split(/[\\/]/);
  const literal: string[] = [];
  for (const s of segments.slice(0, -1)) {
    if (isPattern(s, true)) break;
    literal.push(s);
  }
  if (!literal.length) return '.';
  return literal.join('/') || '/';
}

const asPosix = (p: string) => p.split(path.sep).join('/');

/** The files to upload and their keys: files as they are, directories recursively, quoted globs expanded here. */
async function planUpload(args: string[], f: { prefix?: string; path?: string }): Promise<Planned[]> {
  let prefix = f.prefix ?? '';
  if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
  const planned: Planned[] = [];
  for (const arg of args) {
    const st = fs.statSync(arg, { throwIfNoEntry: false });
    if (st?.isFile()) {
      planned.push({ file: arg, key: f.path ?? prefix + path.basename(arg), size: st.size });
    } else if (st?.isDirectory()) {
      for (const rel of walk(arg)) planned.push({ file: path.join(arg, rel), key: prefix + rel, size: fs.statSync(path.join(arg, rel)).size });
    } else if (!st && isPattern(arg, true)) {
      const base = globBase(arg);
      const found: string[] = [];
      for await (const match of fs.promises.glob(arg)) if (fs.statSync(match, { throwIfNoEntry: false })?.isFile()) found.push(match);
      if (!found.length) throw fieldError('files', `No file matches ${JSON.stringify(arg)}.`);
      for (const match of found.sort()) planned.push({ file: match, key: prefix + asPosix(path.relative(base, match)), size: fs.statSync(match).size });
    } else {
      throw fieldError('files', `Cannot read ${arg}: ${st ? 'Not a file or directory.' : 'No such file.'}`);
    }
  }
  if (f.path !== undefined && (args.length !== 1 || planned.length !== 1 || !fs.statSync(args[0]!, { throwIfNoEntry: false })?.isFile())) {
    throw fieldError('path', '--path names the key of one file: with several files, or a directory or a pattern, use --prefix.');
  }
  if (!planned.length) throw fieldError('files', 'There is no file to upload.');
  const seen = new Map<string, string>();
  for (const p of planned) {
    p.key = checkedKey(p.key, f.path !== undefined ? 'path' : 'prefix');
    const other = seen.get(p.key);
    if (other !== undefined) throw fieldError('files', `${other} and ${p.file} would both be stored as ${p.key}.`);
    seen.set(p.key, p.file);
  }
  return planned;
}

/** Streams one file to PUT objects/{key}, reporting the bytes sent. */
function uploadFile(api: Api, f: ObjectFlags, p: Planned, options: { headers: Record<string, string>; visibility?: string }, onSent: (n: number) => void): Promise<StorageBody<ObjectView>> {
  const open = (): Readable => {
    let sent = 0;
    const tap = watch((chunk) => onSent((sent += chunk.length)));
    pipe(fs.createReadStream(p.file), tap, () => undefined); // a read error fails `tap`, hence the upload
    return tap;
  };
  return api.call<StorageBody<ObjectView>>({
    method: 'PUT',
    site: f.site,
    path: objectsPath(f, keyPath(p.key)),
    query: { visibility: options.visibility },
    headers: options.headers,
    upload: { open, contentType: contentTypeOf(p.file), length: p.size },
  });
}

interface UploadResult {
  path: string;
  file: string;
  status: 'created' | 'replaced' | 'failed';
  size: number;
  error?: string;
}

interface UploadReport {
  created: number;
  replaced: number;
  failed: number;
  results: UploadResult[];
}

/** A failure that is not about one file (the site, the app, the bucket, the login, the connection) stops an upload of several. */
const stopsAll = (err: DomainError) => err.status === 401 || err.status === 404 || err.code === 'SERVICE_UNAVAILABLE';
const reason = (err: DomainError) => errorLine(err).replace(/^Error: /, '');

class ObjectUploadCommand extends ApiCommand<typeof ObjectUploadCommand> {
  static override summary = 'Upload files, directories (recursively) or glob patterns to a bucket.';
  static override description =
    'Each file is streamed to PUT …/objects/{key} with a Content-Type guessed from its extension (the API sniffs the bytes). The key is --prefix plus the file name; for a directory, plus the path under it; for a quoted pattern (\'photos/*.jpg\', \'src/**/*.png\'), plus the path under its literal directory. --path sets the key of a single file. --metadata {"name":"value"} becomes X-Metadata-<name> headers. One line per file (created, replaced or failed) and progress on stderr; exit code 1 when a file failed. --json prints {created, replaced, failed, results: [{path, file, status, size, error?}]}.';
  static override examples = [
    '<%= config.bin %> object upload report.pdf --bucket docs --site shop_prod --app crm',
    "<%= config.bin %> object upload ./photos 'scans/*.png' --bucket media --prefix 2024/ --site shop_prod --app crm",
    `<%= config.bin %> object upload logo.png --bucket media --path brand/logo.png --metadata '{"author":"Ada"}' --visibility public --site shop_prod --app crm --json`,
  ];
  static override args = { files: Args.string({ description: 'Files, directories or quoted glob patterns', required: true, multiple: true }) };
  static override flags = {
    ...objectFlags,
    prefix: Flags.string({ summary: 'A folder for the keys (dir/).' }),
    path: Flags.string({ summary: 'The key of the one file uploaded.', exclusive: ['prefix'] }),
    metadata: Flags.string({ summary: 'Metadata as a JSON object (sent as X-Metadata-<name> headers; names are lower-cased).' }),
    visibility: Flags.string({ summary: 'private or public (default: the bucket\'s).', options: ['private', 'public'] }),
  };

  async run(): Promise<UploadReport> {
    const f = this.flags;
    const args = this.args.files as unknown as string[];
    const headers = metadataHeaders(f.metadata);
    const planned = await planUpload(args, f);
    const api = await this.api();
    const total = planned.reduce((n, p) => n + p.size, 0);
    this.info(`Uploading ${plural(planned.length, 'file')} (${bytes(total)}) to ${f.bucket}…`);
    const report: UploadReport = { created: 0, replaced: 0, failed: 0, results: [] };
    const width = Math.max(...planned.map((p) => p.key.length));
    for (const p of planned) {
      const progress = new Progress((line) => this.info(line));
      const onSent = (n: number) => progress.tick(() => `  ${p.key}: ${bytes(n)} of ${bytes(p.size)} sent (${p.size ? Math.floor((n / p.size) * 100) : 100}%)…`);
      let result: UploadResult;
      try {
        const body = await uploadFile(api, f, p, { headers, visibility: f.visibility }, onSent);
        result = { path: body.data.file_path, file: p.file, status: body.status_code === 201 ? 'created' : 'replaced', size: body.data.size };
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        const done = report.created + report.replaced;
        if (stopsAll(err)) {
          if (!done) throw err;
          throw new DomainError(err.code, `${err.message} (${plural(done, 'file')} uploaded before ${p.file})`, { errors: err.errors, detail: err.detail });
        }
        result = { path: p.key, file: p.file, status: 'failed', size: p.size, error: reason(err) };
      }
      report.results.push(result);
      report[result.status]++;
      this.log(result.status === 'failed' ? `failed    ${p.key}: ${result.error}` : `${result.status.padEnd(9)} ${result.path.padEnd(width)}  ${bytes(result.size)}`);
    }
    const summary = [report.created && `${report.created} created`, report.replaced && `${report.replaced} replaced`].filter(Boolean).join(', ');
    this.log(`Uploaded ${plural(report.created + report.replaced, 'file')}${summary ? ` (${summary})` : ''}; ${report.failed} failed.`);
    if (report.failed) process.exitCode = 1;
    return report;
  }
}

// ---- download ---------------------------------------------------------------------------------

interface DownloadSummary {
  path: string;
  output: string | null;
  bytes: number;
}

class ObjectDownloadCommand extends ApiCommand<typeof ObjectDownloadCommand> {
  static override summary = 'Download an object to a file (or a directory), or to stdout.';
  static override description =
    'The bytes are streamed from the API as they come (any size); a file is written to <file>.part-<pid>, then renamed. Progress on stderr (bytes of Content-Length). Without --output, or with --output -, the bytes go to stdout. With --json (which needs a file --output), prints {path, output, bytes}.';
  static override examples = [
    '<%= config.bin %> object download reports/2024.pdf --bucket docs --output 2024.pdf --site shop_prod --app crm',
    '<%= config.bin %> object download logs/app.log --bucket logs --site shop_prod --app crm | tail',
  ];
  static override args = { key: Args.string({ description: 'The object key (its path in the bucket)', required: true }) };
  static override flags = { ...objectFlags, output: Flags.string({ char: 'o', summary: 'The file (or existing directory) to write; - for stdout (the default).' }) };

  async run(): Promise<DownloadSummary> {
    const f = this.flags;
    const key = checkedKey(this.args.key, 'key');
    const toStdout = f.output === undefined || f.output === '-';
    if (this.jsonEnabled() && toStdout) throw new DomainError('BAD_REQUEST', '--json needs --output FILE (the bytes would share stdout with the JSON).');
    let output = toStdout ? null : f.output!;
    if (output !== null && fs.statSync(output, { throwIfNoEntry: false })?.isDirectory()) output = path.join(output, key.slice(key.lastIndexOf('/') + 1));
    const res = await (await this.api()).receive({ method: 'GET', site: f.site, path: objectsPath(f, keyPath(key)) }, '*/*');
    const length = Number(res.header('content-length'));
    const size = Number.isFinite(length) && res.header('content-length') !== undefined ? length : undefined;
    const where = output ?? 'stdout';
    this.info(`Downloading ${key}${size === undefined ? '' : ` (${bytes(size)})`} to ${where}…`);
    const progress = new Progress((line) => this.info(line));
    let received = 0;
    const tap = watch((chunk) => {
      received += chunk.length;
      progress.tick(() => `  ${bytes(received)}${size === undefined ? '' : ` of ${bytes(size)} (${size ? Math.floor((received / size) * 100) : 100}%)`} received…`);
    });
    if (output !== null) {
      const tmp = `${output}.part-${process.pid}`;
      try {
        await pipeline(res.stream(), tap, fs.createWriteStream(tmp));
        if (size !== undefined && received !== size) throw new DomainError('BAD_GATEWAY', `The download of ${key} ended after ${received} of ${size} bytes.`);
        fs.renameSync(tmp, output);
      } catch (err) {
        fs.rmSync(tmp, { force: true });
        throw err;
      }
    } else {
      await pipeline(res.stream(), tap, process.stdout, { end: false });
      if (size !== undefined && received !== size) throw new DomainError('BAD_GATEWAY', `The download of ${key} ended after ${received} of ${size} bytes.`);
    }
    const summary: DownloadSummary = { path: key, output, bytes: received };
    const done = `Downloaded ${key} (${bytes(received)}) to ${where}.`;
    if (output !== null) this.log(done);
    else this.info(done);
    return summary;
  }
}

// ---- delete -------------------------------------------------------------------------------------

interface RemoveReport {
  deleted_count: number;
  deleted: string[];
  failed: { path: string; error: string }[];
}

const LIST_PAGE = 100;
const BATCH = 100;

class ObjectRmCommand extends ApiCommand<typeof ObjectRmCommand> {
  static override summary = 'Delete objects: keys, or quoted glob patterns matched against the bucket.';
  static override description =
    "One key is one DELETE. Several keys, or patterns ('logs/*.txt': * and ? within a segment, [a-z], ** for any depth; \\* for a literal star), go to POST …/objects/batch-delete/ in batches of 100, after listing the objects under the pattern's literal prefix. One line per deleted object; the failed ones (and patterns that match nothing) are reported and make the exit code 1. --json prints {deleted_count, deleted, failed: [{path, error}]}.";
  static override examples = [
    '<%= config.bin %> object rm reports/old.pdf --bucket docs --site shop_prod --app crm',
    "<%= config.bin %> object rm 'logs/2023-*.txt' 'tmp/**' --bucket logs --site shop_prod --app crm --json",
  ];
  static override args = { keys: Args.string({ description: 'Object keys or quoted glob patterns', required: true, multiple: true }) };
  static override flags = { ...objectFlags };

  /** Every key of the bucket the caller may read that starts with `prefix`. */
  private async listKeys(f: ObjectFlags, prefix: string, progress: Progress): Promise<string[]> {
    const keys: string[] = [];
    for (let page = 1; ; page++) {
      const body = await this.call<PageEnvelope<ObjectView>>({
        method: 'GET',
        site: f.site,
        path: objectsPath(f),
        query: { prefix: prefix || undefined, ordering: 'path', page: String(page), page_size: String(LIST_PAGE), _count: 'none' },
      });
      keys.push(...body.results.map((o) => o.file_path));
      progress.tick(() => `  ${plural(keys.length, 'object')} listed…`);
      if (body.results.length < LIST_PAGE) return keys;
    }
  }

  async run(): Promise<RemoveReport> {
    const f = this.flags;
    const args = this.args.keys as unknown as string[];
    const report: RemoveReport = { deleted_count: 0, deleted: [], failed: [] };
    const progress = new Progress((line) => this.info(line));
    const targets = new Set<string>();
    const patterns = args.filter((a) => isPattern(a));
    for (const a of args) if (!isPattern(a)) targets.add(checkedKey(a, 'keys'));
    if (!patterns.length && targets.size === 1) {
      const [key] = targets;
      await this.call<StorageBody>({ method: 'DELETE', site: f.site, path: objectsPath(f, keyPath(key!)) });
      report.deleted_count = 1;
      report.deleted.push(key!);
      this.log(`deleted  ${key}`);
    } else {
      if (patterns.length) this.info(`Listing the objects of ${f.bucket}…`);
      const listed = new Map<string, string[]>();
      for (const pattern of patterns) {
        const prefix = literalPrefix(pattern);
        const keys = listed.get(prefix) ?? (await this.listKeys(f, prefix, progress));
        listed.set(prefix, keys);
        const matches = keys.filter(globMatcher(pattern));
        if (!matches.length) report.failed.push({ path: pattern, error: 'No object matches this pattern.' });
        for (const k of matches) targets.add(k);
      }
      const all = [...targets];
      for (let from = 0; from < all.length; from += BATCH) {
        const batch = all.slice(from, from + BATCH);
        const body = await this.call<StorageBody<{ deleted_count: number; failed: { path: string; error: string }[] }>>({ method: 'POST', site: f.site, path: objectsPath(f, 'batch-delete/'), body: { paths: batch } });
        const failed = new Set(body.data.failed.map((x) => x.path));
        report.deleted_count += body.data.deleted_count;
        report.failed.push(...body.data.failed);
        for (const k of batch) {
          if (failed.has(k)) continue;
          report.deleted.push(k);
          this.log(`deleted  ${k}`);
        }
        if (all.length > BATCH) progress.tick(() => `  ${report.deleted_count} of ${all.length} deleted…`);
      }
    }
    for (const x of report.failed) this.log(`failed   ${x.path}: ${x.error}`);
    this.log(`${plural(report.deleted_count, 'object')} deleted${report.failed.length ? `, ${report.failed.length} failed` : ''}.`);
    if (report.failed.length) process.exitCode = 1;
    return report;
  }
}

// ---- list, copy, move -------------------------------------------------------------------------

const COLUMNS: Column<ObjectView>[] = [
  { header: 'Path', get: (o) => o.file_path },
  { header: 'Size', get: (o) => bytes(o.size) },
  { header: 'Type', get: (o) => o.mimetype },
  { header: 'Updated', get: (o) => when(o.updated_at) },
  { header: 'Visibility', get: (o) => o.visibility ?? '(bucket)' },
];

/** An object as `key: value` lines (its main fields). */
const objectLines = (o: ObjectView) =>
  keyValues({ path: o.file_path, bucket: o.bucket_slug, size: `${o.size} (${bytes(o.size)})`, mimetype: o.mimetype, visibility: o.visibility ?? '(bucket)', metadata: o.metadata, uuid: o.uuid, updated_at: when(o.updated_at) });

/** `cp a.txt dir/` → dir/a.txt: a destination ending with a slash keeps the source's file name. */
function destination(source: string, dest: string): string {
  return dest.endsWith('/') ? dest + source.slice(source.lastIndexOf('/') + 1) : dest;
}

export const OBJECT_COMMANDS = {
  'object:upload': ObjectUploadCommand,
  'object:download': ObjectDownloadCommand,

  'object:ls': operation({
    summary: 'List the objects of a bucket.',
    description:
      'Newest first unless --ordering says otherwise (created_at, updated_at, size, filename, path; - descends). --filter takes any parameter of the list (name=value, repeatable): file__icontains, filename__iendswith, size__gte, created_after, mimetype, mimetype_category, visibility, created_by_me, metadata_search, …; an unknown one is refused. Pages of 10 by default (at most 100). Prints the API page with --json.',
    examples: [
      'object ls --bucket media --prefix 2024/ --site shop_prod --app crm',
      "object ls --bucket media --filter mimetype_category=image --filter 'size__gte=100000' --ordering -size --page-size 50 --site shop_prod --app crm --json",
    ],
    flags: {
      ...objectFlags,
      prefix: Flags.string({ summary: 'Only keys starting with this.' }),
      search: Flags.string({ summary: 'Part of the file name or path (case-insensitive).' }),
      ordering: Flags.string({ summary: 'Sort field, - for descending (default -created_at).' }),
      filter: Flags.string({ summary: 'A list parameter name=value (repeatable; all must hold): size__gte=1000, mimetype_category=image, …', multiple: true }),
      ...pageFlags,
      'page-size': Flags.string({ summary: 'Objects per page (default 10, at most 100).' }),
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: objectsPath(f),
      query: recordQuery(f.filter, { prefix: f.prefix, search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] }),
    }),
    render: (page: PageEnvelope<ObjectView>) => {
      if (page.count !== null) return pageTable(page, COLUMNS, ['object', 'objects']);
      const rows = page.results.length ? `${table(page.results, COLUMNS)}\n\n` : '';
      return `${rows}${plural(page.results.length, 'object')} shown${page.results.length && page.next ? ' (next: --page …)' : ''}`;
    },
  }),

  'object:cp': operation({
    summary: 'Copy an object (in its bucket, or to another bucket of the app).',
    description: 'A new object (new uuid; the metadata plus copied_from); the source is unchanged. A destination ending with / keeps the file name. --json prints {success, message, status_code, data: object}.',
    examples: ['object cp reports/2024.pdf archive/ --bucket docs --site shop_prod --app crm', 'object cp logo.png brand/logo.png --bucket media --to-bucket public-media --site shop_prod --app crm --json'],
    args: {
      source: Args.string({ description: 'The key of the object to copy', required: true }),
      dest: Args.string({ description: 'The key of the copy (ending with /: a folder)', required: true }),
    },
    flags: { ...objectFlags, 'to-bucket': Flags.string({ summary: 'The bucket of the copy (default: the same bucket).' }) },
    request: ({ flags: f, args }) => {
      const source = checkedKey(args.source, 'source_path');
      return {
        method: 'POST',
        site: f.site,
        path: objectsPath(f, 'copy/'),
        body: { source_path: source, destination_bucket: f['to-bucket'], destination_path: checkedKey(destination(source, args.dest), 'destination_path') },
      };
    },
    render: (body: StorageBody<ObjectView>) => [body.message, objectLines(body.data)],
  }),

  'object:mv': operation({
    summary: 'Move (rename) an object within its bucket.',
    description: 'The same object (uuid kept) at a new key; refused when the destination exists. A destination ending with / keeps the file name. --json prints {success, message, status_code, data: object}.',
    examples: ['object mv inbox/scan.pdf archive/ --bucket docs --site shop_prod --app crm', 'object mv draft.md final.md --bucket docs --site shop_prod --app crm --json'],
    args: {
      source: Args.string({ description: 'The key of the object to move', required: true }),
      dest: Args.string({ description: 'Its new key (ending with /: a folder)', required: true }),
    },
    flags: { ...objectFlags },
    request: ({ flags: f, args }) => {
      const source = checkedKey(args.source, 'source_path');
      return { method: 'POST', site: f.site, path: objectsPath(f, 'move/'), body: { source_path: source, destination_path: checkedKey(destination(source, args.dest), 'destination_path') } };
    },
    render: (body: StorageBody<ObjectView>) => [body.message, objectLines(body.data)],
  }),

  'object:rm': ObjectRmCommand,
};
