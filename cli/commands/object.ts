// `platform object …`: the objects of a storage bucket (/api/apps/{app}/storage/buckets/{bucket}/objects/…).
// Uploads and downloads are streams in both transports: a file is never read whole into memory.
// Keys are checked as the API checks them (normalizeKey, the same message) before they go into a
// URL: a `..` segment would otherwise be resolved away by the URL and reach another route.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline as pipe } from 'node:stream';
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { globMatcher, literalPrefix } from '../../shared/storage/glob.ts';
import { filenameOf, normalizeKey } from '../../shared/storage/keys.ts';
import type { ObjectView } from '../../shared/storage/object.service.ts';
import { path as apiPath } from '../api.ts';
import { api, ApiCommand, type ApiSpec } from '../base.ts';
import { columns, errorLine, keyValues, pageTable, table, when } from '../output.ts';
import { jsonObject, pageFlags, siteFlag } from '../flags.ts';
import { bytes, plural, progress, recordQuery, save, sentLine, watch } from '../tables.ts';

const bucket = Flags.string({ char: 'b', summary: 'The bucket slug.', required: true });
const objectFlags = { site: siteFlag, app: Flags.string({ summary: 'The app slug.', required: true }), bucket };
type ObjectFlags = { site: string; app: string; bucket: string };
/** …/objects/ and a key or a sub-path, each segment encoded, the slashes kept (`objects/a/b%20c.txt`). */
const objectsPath = (f: ObjectFlags, rest = '') => apiPath`/api/apps/${f.app}/storage/buckets/${f.bucket}/objects/` + rest.split('/').map(encodeURIComponent).join('/');

interface StorageBody<T> {
  message: string;
  status_code: number;
  data: T;
}

/** Whether an argument is a glob pattern (`*`, `?`, `[…]`; `{a,b}` for local files). */
const isPattern = (s: string, braces = false) => /[*?[]/.test(s) || (braces && /[{}]/.test(s));

// ---- upload -----------------------------------------------------------------------------------

/** `--metadata '{"author":"Ada"}'` → `X-Metadata-author: Ada` (the API lower-cases the names). */
function metadataHeaders(text: string | undefined): Record<string, string> {
  const value = text === undefined ? {} : jsonObject(text, 'metadata');
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(value)) {
    if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name)) throw fieldError('metadata', `The name ${JSON.stringify(name)} cannot be sent as a header: use letters, digits and - _ . only.`);
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    if (/[^\x20-\x7e\t]/.test(text)) throw fieldError('metadata', `The value of "${name}" cannot be sent as a header: printable ASCII only.`);
    headers[`X-Metadata-${name}`] = text;
  }
  return headers;
}

/** The regular files under `dir`, in name order, as paths relative to it (symbolic links to directories are not followed). */
function walk(dir: string, rel = ''): string[] {
  const entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries.flatMap((e) => {
    const child = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) return walk(dir, child);
    return e.isFile() || (e.isSymbolicLink() && fs.statSync(path.join(dir, child), { throwIfNoEntry: false })?.isFile()) ? [child] : [];
  });
}

/** The literal directory a local glob starts from (its segments before the first with a wildcard). */
function globBase(pattern: string): string {
  const segments = pattern.split(/[\\/]/).slice(0, -1);
  const first = segments.findIndex((s) => isPattern(s, true));
  const literal = first < 0 ? segments : segments.slice(0, first);
  return literal.length ? literal.join('/') || '/' : '.';
}

type Planned = { file: string; key: string; size: number };

/** The files to upload and their keys: files as they are, directories recursively, quoted globs expanded here. */
async function planUpload(args: string[], f: { prefix?: string; path?: string }): Promise<Planned[]> {
  const prefix = !f.prefix || f.prefix.endsWith('/') ? (f.prefix ?? '') : `${f.prefix}/`;
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
      for (const match of found.sort()) planned.push({ file: match, key: prefix + path.relative(base, match).split(path.sep).join('/'), size: fs.statSync(match).size });
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
    p.key = normalizeKey(p.key, f.path !== undefined ? 'path' : 'prefix');
    const other = seen.get(p.key);
    if (other !== undefined) throw fieldError('files', `${other} and ${p.file} would both be stored as ${p.key}.`);
    seen.set(p.key, p.file);
  }
  return planned;
}

type UploadResult = { path: string; file: string; status: 'created' | 'replaced' | 'failed'; size: number; error?: string };
type UploadReport = { created: number; replaced: number; failed: number; results: UploadResult[] };

class ObjectUploadCommand extends ApiCommand<typeof ObjectUploadCommand> {
  static override summary = 'Upload files, directories (recursively) or glob patterns to a bucket.';
  static override description =
    'Each file is streamed to PUT …/objects/{key} with a Content-Type guessed from its extension (the API sniffs the bytes). The key is --prefix plus the file name; for a directory, plus the path under it; for a quoted pattern (\'photos/*.jpg\', \'src/**/*.png\'), plus the path under its literal directory. --path sets the key of a single file. --metadata {"name":"value"} becomes X-Metadata-<name> headers. One line per file (created, replaced or failed) and progress on stderr; exit code 1 when a file failed. --json prints {created, replaced, failed, results: [{path, file, status, size, error?}]}.';
  static override examples = [
    "<%= config.bin %> object upload ./photos 'scans/*.png' --bucket media --prefix 2024/ --site shop_prod --app crm",
    `<%= config.bin %> object upload logo.png --bucket media --path brand/logo.png --metadata '{"author":"Ada"}' --visibility public --site shop_prod --app crm --json`,
  ];
  static override args = { files: Args.string({ description: 'Files, directories or quoted glob patterns', required: true, multiple: true }) };
  static override flags = {
    ...objectFlags,
    prefix: Flags.string({ summary: 'A folder for the keys (dir/).' }),
    path: Flags.string({ summary: 'The key of the one file uploaded.', exclusive: ['prefix'] }),
    metadata: Flags.string({ summary: 'Metadata as a JSON object (sent as X-Metadata-<name> headers; names are lower-cased).' }),
    visibility: Flags.string({ summary: "private or public (default: the bucket's).", options: ['private', 'public'] }),
  };

  async run(): Promise<UploadReport> {
    const f = this.flags;
    const headers = metadataHeaders(f.metadata);
    const planned = await planUpload(this.args.files as unknown as string[], f);
    const api = await this.api();
    this.info(`Uploading ${plural(planned.length, 'file')} (${bytes(planned.reduce((n, p) => n + p.size, 0))}) to ${f.bucket}…`);
    const report: UploadReport = { created: 0, replaced: 0, failed: 0, results: [] };
    const width = Math.max(...planned.map((p) => p.key.length));
    for (const p of planned) {
      const tick = progress((line) => this.info(line));
      const open = () => {
        let sent = 0;
        const tap = watch((chunk) => {
          sent += chunk.length;
          tick(() => sentLine(sent, p.size, p.key));
        });
        pipe(fs.createReadStream(p.file), tap, () => undefined); // a read error fails `tap`, hence the upload
        return tap;
      };
      let result: UploadResult;
      try {
        const mime = (await import('mime-types')).default;
        const upload = { open, contentType: mime.lookup(p.file) || 'application/octet-stream', length: p.size };
        const body = await api.call<StorageBody<ObjectView>>({ method: 'PUT', site: f.site, path: objectsPath(f, p.key), query: { visibility: f.visibility }, headers, upload });
        result = { path: body.data.file_path, file: p.file, status: body.status_code === 201 ? 'created' : 'replaced', size: body.data.size };
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        // A failure that is not about one file (the site, the app, the bucket, the login, the connection) stops the upload.
        if (err.status === 401 || err.status === 404 || err.code === 'SERVICE_UNAVAILABLE') {
          const done = report.created + report.replaced;
          if (!done) throw err;
          throw new DomainError(err.code, `${err.message} (${plural(done, 'file')} uploaded before ${p.file})`, { errors: err.errors, detail: err.detail });
        }
        result = { path: p.key, file: p.file, status: 'failed', size: p.size, error: errorLine(err).replace(/^Error: /, '') };
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

  async run(): Promise<{ path: string; output: string | null; bytes: number }> {
    const f = this.flags;
    const key = normalizeKey(this.args.key, 'key');
    const toStdout = f.output === undefined || f.output === '-';
    if (this.jsonEnabled() && toStdout) throw new DomainError('BAD_REQUEST', '--json needs --output FILE (the bytes would share stdout with the JSON).');
    let output = toStdout ? null : f.output!;
    if (output !== null && fs.statSync(output, { throwIfNoEntry: false })?.isDirectory()) output = path.join(output, filenameOf(key));
    const res = await (await this.api()).receive({ method: 'GET', site: f.site, path: objectsPath(f, key) }, '*/*');
    const length = res.header('content-length');
    const size = length !== undefined && Number.isFinite(Number(length)) ? Number(length) : undefined;
    const where = output ?? 'stdout';
    this.info(`Downloading ${key}${size === undefined ? '' : ` (${bytes(size)})`} to ${where}…`);
    const tick = progress((line) => this.info(line));
    let received = 0;
    const tap = watch((chunk) => {
      received += chunk.length;
      tick(() => `  ${bytes(received)}${size === undefined ? '' : ` of ${bytes(size)} (${size ? Math.floor((received / size) * 100) : 100}%)`} received…`);
    });
    await save(res.stream(), tap, output, () => {
      if (size !== undefined && received !== size) throw new DomainError('BAD_GATEWAY', `The download of ${key} ended after ${received} of ${size} bytes.`);
    });
    const done = `Downloaded ${key} (${bytes(received)}) to ${where}.`;
    if (output !== null) this.log(done);
    else this.info(done);
    return { path: key, output, bytes: received };
  }
}

// ---- delete -------------------------------------------------------------------------------------

type RemoveReport = { deleted_count: number; deleted: string[]; failed: { path: string; error: string }[] };
/** Objects per page of a pattern's listing, and keys per batch-delete (the API's limit). */
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
  static override flags = objectFlags;

  /** Every key of the bucket the caller may read that starts with `prefix`. */
  private async listKeys(f: ObjectFlags, prefix: string, tick: (line: () => string) => void): Promise<string[]> {
    const keys: string[] = [];
    for (let page = 1; ; page++) {
      const query = { prefix: prefix || undefined, ordering: 'path', page: String(page), page_size: String(BATCH), _count: 'none' };
      const body = await this.call<PageEnvelope<ObjectView>>({ method: 'GET', site: f.site, path: objectsPath(f), query });
      keys.push(...body.results.map((o) => o.file_path));
      tick(() => `  ${plural(keys.length, 'object')} listed…`);
      if (body.results.length < BATCH) return keys;
    }
  }

  async run(): Promise<RemoveReport> {
    const f = this.flags;
    const args = this.args.keys as unknown as string[];
    const report: RemoveReport = { deleted_count: 0, deleted: [], failed: [] };
    const tick = progress((line) => this.info(line));
    const patterns = args.filter((a) => isPattern(a));
    const targets = new Set(args.filter((a) => !isPattern(a)).map((a) => normalizeKey(a, 'keys')));
    if (!patterns.length && targets.size === 1) {
      const key = [...targets][0]!;
      await this.call({ method: 'DELETE', site: f.site, path: objectsPath(f, key) });
      report.deleted_count = 1;
      report.deleted.push(key);
      this.log(`deleted  ${key}`);
    } else {
      if (patterns.length) this.info(`Listing the objects of ${f.bucket}…`);
      const listed = new Map<string, string[]>();
      for (const pattern of patterns) {
        const prefix = literalPrefix(pattern);
        if (!listed.has(prefix)) listed.set(prefix, await this.listKeys(f, prefix, tick));
        const matches = listed.get(prefix)!.filter(globMatcher(pattern));
        if (!matches.length) report.failed.push({ path: pattern, error: 'No object matches this pattern.' });
        for (const k of matches) targets.add(k);
      }
      const all = [...targets];
      for (let from = 0; from < all.length; from += BATCH) {
        const batch = all.slice(from, from + BATCH);
        const body = await this.call<StorageBody<Omit<RemoveReport, 'deleted'>>>({ method: 'POST', site: f.site, path: objectsPath(f, 'batch-delete/'), body: { paths: batch } });
        const failed = new Set(body.data.failed.map((x) => x.path));
        report.deleted_count += body.data.deleted_count;
        report.failed.push(...body.data.failed);
        for (const k of batch.filter((k) => !failed.has(k))) {
          report.deleted.push(k);
          this.log(`deleted  ${k}`);
        }
        if (all.length > BATCH) tick(() => `  ${report.deleted_count} of ${all.length} deleted…`);
      }
    }
    for (const x of report.failed) this.log(`failed   ${x.path}: ${x.error}`);
    this.log(`${plural(report.deleted_count, 'object')} deleted${report.failed.length ? `, ${report.failed.length} failed` : ''}.`);
    if (report.failed.length) process.exitCode = 1;
    return report;
  }
}

// ---- list, copy, move -------------------------------------------------------------------------

const COLUMNS = columns<ObjectView>('file_path:path size mimetype:type updated_at:updated visibility', { size: (o) => bytes(o.size), visibility: (o) => o.visibility ?? '(bucket)' });

/** The message, and the object as `key: value` lines (its main fields). */
const objectLines = ({ message, data: o }: StorageBody<ObjectView>) => [
  message,
  keyValues({ path: o.file_path, bucket: o.bucket_slug, size: `${o.size} (${bytes(o.size)})`, mimetype: o.mimetype, visibility: o.visibility ?? '(bucket)', metadata: o.metadata, uuid: o.uuid, updated_at: when(o.updated_at) }),
];

/** Copy and move: the keys checked; a destination ending with a slash keeps the source's file name (`cp a.txt dir/` → dir/a.txt). */
const relocation: ApiSpec<{}, {}, StorageBody<ObjectView>> = {
  args: ['source_path', 'destination_path'],
  body: ({ args }) => {
    const source = normalizeKey(args.source_path, 'source_path');
    const dest = args.destination_path.endsWith('/') ? args.destination_path + filenameOf(source) : args.destination_path;
    return { source_path: source, destination_path: normalizeKey(dest, 'destination_path') };
  },
  render: objectLines,
};

export const OBJECT_COMMANDS = {
  'object:upload': ObjectUploadCommand,
  'object:download': ObjectDownloadCommand,
  'object:ls': api('storage_objects_list', {
    description:
      'Newest first unless --ordering says otherwise (created_at, updated_at, size, filename, path; - descends). --filter takes any parameter of the list (name=value, repeatable): file__icontains, filename__iendswith, size__gte, created_after, mimetype, mimetype_category, visibility, created_by_me, metadata_search, _count=none, …; an unknown one is refused. Prints the API page with --json.',
    examples: ["object ls --bucket media --prefix 2024/ --filter mimetype_category=image --ordering -size --site shop_prod --app crm"],
    flags: {
      bucket,
      prefix: Flags.string({ summary: 'Only keys starting with this.' }),
      search: Flags.string({ summary: 'Part of the file name or path (case-insensitive).' }),
      ordering: Flags.string({ summary: 'Sort field, - for descending (default -created_at).' }),
      filter: Flags.string({ summary: 'A list parameter name=value (repeatable; all must hold): size__gte=1000, mimetype_category=image, …', multiple: true }),
      ...pageFlags,
      'page-size': Flags.string({ summary: 'Objects per page (default 10, at most 100).' }),
    },
    query: ({ flags: f }) => recordQuery(f.filter, { prefix: f.prefix, search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] }),
    render: (page: PageEnvelope<ObjectView>) => {
      if (page.count !== null) return pageTable(page, COLUMNS, ['object', 'objects']);
      const rows = page.results.length ? `${table(page.results, COLUMNS)}\n\n` : '';
      return `${rows}${plural(page.results.length, 'object')} shown${page.results.length && page.next ? ' (next: --page …)' : ''}`;
    },
  }),
  'object:cp': api('storage_objects_copy', {
    ...relocation,
    summary: 'Copy an object, in its bucket or to another bucket of the app (a destination ending with / keeps the file name).',
    examples: ['object cp reports/2024.pdf archive/ --bucket docs --site shop_prod --app crm', 'object cp logo.png brand/logo.png --bucket media --to-bucket public-media --site shop_prod --app crm --json'],
    rename: { destination_bucket: 'to-bucket' },
    flags: { bucket, 'to-bucket': Flags.string({ summary: 'The bucket of the copy (default: the same bucket).' }) },
  }),
  'object:mv': api('storage_objects_move', {
    ...relocation,
    summary: 'Move (rename) an object within its bucket (a destination ending with / keeps the file name).',
    examples: ['object mv inbox/scan.pdf archive/ --bucket docs --site shop_prod --app crm'],
    flags: { bucket },
  }),
  'object:rm': ObjectRmCommand,
};
