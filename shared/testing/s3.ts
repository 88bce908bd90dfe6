// Test utility: an S3-protocol server in process (s3rver) on a free port over a temporary
// directory, for suites that exercise the S3 object store against real HTTP and XML.
//
// s3rver 3.7.1 lacks three operations of the multipart API that the store relies on and the
// tests check: ListMultipartUploads (`GET /{bucket}?uploads`) and ListParts
// (`GET /{bucket}/{key}?uploadId=…`), which minio's listIncompleteUploads calls, and
// AbortMultipartUpload (`DELETE /{bucket}/{key}?uploadId=…`). They are added here in front of its
// router, over its own upload directories (`{dir}/{bucket}/._S3rver_uploads/{uploadId}/`: a `key`
// file, a `metadata` file and one file per part with its `.md5`), so an upload that was started
// and never completed or aborted is visible exactly as on S3.
// Its ListObjectsV2 makes continuation tokens with DES, which Node 24's OpenSSL 3 no longer has:
// any listing of more than 1,000 keys fails with a 500. ListObjectsV2 is answered here too, from
// its store, with tokens of our own.
// Its GetObject reads `Range: bytes=0-0` as the whole object (an end of 0 counts as none); that
// one answer is cut to its first byte here, as S3 answers.
// Its DeleteObjects deletes the keys concurrently, each then pruning empty parent directories
// without expecting another to have pruned them (ENOENT, a 500 that minio retries); those
// pruning errors are ignored here (the object's own files are gone by then).
// s3rver checks that the access key is `S3RVER` but does not verify signatures (any secret passes).
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Server } from 'node:http';
import { Readable } from 'node:stream';

export interface TestS3 {
  /** `http://127.0.0.1:{port}` */
  endpoint: string;
  accessKey: string;
  secretKey: string;
  /** s3rver's data directory (buckets are its subdirectories). */
  directory: string;
  close(): Promise<void>;
}

type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;
interface KoaContext {
  app: { store: S3rverStore };
  headers: Record<string, string | string[] | undefined>;
  set(field: string, value: string): void;
  length: number;
  response: { get(field: string): string };
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  status: number;
  type: string;
  body: unknown;
}
interface S3rverInstance {
  middleware: Middleware[];
  store: S3rverStore;
  run(): Promise<AddressInfo>;
  httpServer?: Server;
}
interface S3rverStore {
  getBucket(name: string): Promise<unknown>;
  deleteObject(bucket: string, key: string): Promise<void>;
  listObjects(bucket: string, options: { prefix: string; startAfter: string; maxKeys: number; delimiter: string }): Promise<{
    objects: { key: string; size: number; lastModifiedDate: Date; metadata: Record<string, string> }[];
    commonPrefixes: string[];
    isTruncated: boolean;
  }>;
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance;

const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;

export async function startS3(): Promise<TestS3> {
  const directory = await mkdtemp(path.join(tmpdir(), 's3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
  server.middleware.unshift(multipartShim(directory));
  const deleteObject = server.store.deleteObject.bind(server.store);
  server.store.deleteObject = async (bucket, key) => {
    try {
      await deleteObject(bucket, key);
    } catch (e) {
      if (!['ENOENT', 'ENOTEMPTY'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
    }
  };
  const address = await server.run();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    directory,
    async close() {
      const http = server.httpServer;
      if (http) {
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      }
      await rm(directory, { recursive: true, force: true });
    },
  };
}

const UPLOADS = '._S3rver_uploads';
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

function xmlEscape(s: string): string {
  return s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function uploadsOf(directory: string, bucket: string): Promise<{ uploadId: string; key: string }[]> {
  const dir = path.join(directory, bucket, UPLOADS);
  let ids: string[];
  try {
    ids = await readdir(dir);
  } catch {
    return [];
  }
  const out: { uploadId: string; key: string }[] = [];
  for (const uploadId of ids) {
    try {
      out.push({ uploadId, key: await readFile(path.join(dir, uploadId, 'key'), 'utf8') });
    } catch {
      // completed or aborted meanwhile
    }
  }
  return out;
}

function multipartShim(directory: string): Middleware {
  return async (ctx, next) => {
    const parts = ctx.path.split('/').filter(Boolean);
    const bucket = parts[0] ?? '';
    if (!BUCKET_RE.test(bucket)) return next();
    if (ctx.method === 'GET' && parts.length === 1 && 'uploads' in ctx.query) {
      const prefix = typeof ctx.query.prefix === 'string' ? ctx.query.prefix : '';
      const uploads = (await uploadsOf(directory, bucket)).filter((u) => u.key.startsWith(prefix));
      ctx.status = 200;
      ctx.type = 'application/xml';
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
        `<Bucket>${xmlEscape(bucket)}</Bucket><Prefix>${xmlEscape(prefix)}</Prefix><IsTruncated>false</IsTruncated>` +
        uploads
          .map((u) => `<Upload><Key>${xmlEscape(u.key)}</Key><UploadId>${xmlEscape(u.uploadId)}</UploadId><Initiated>${new Date().toISOString()}</Initiated></Upload>`)
          .join('') +
        '</ListMultipartUploadsResult>';
      return;
    }
    if (ctx.method === 'GET' && parts.length > 1 && ctx.headers.range === 'bytes=0-0') {
      await next();
      if (ctx.status === 206 && ctx.body instanceof Readable) {
        const whole = ctx.body;
        const first = await new Promise<Buffer>((resolve, reject) => {
          whole.once('error', reject).once('readable', () => resolve(Buffer.from((whole.read() as Buffer | null) ?? Buffer.alloc(0)).subarray(0, 1)));
        });
        whole.destroy();
        const total = /\/(\d+)$/.exec(String(ctx.response.get('Content-Range')))?.[1] ?? '*';
        ctx.body = first;
        ctx.length = first.length;
        ctx.set('Content-Range', `bytes 0-0/${total}`);
      }
      return;
    }
    if (ctx.method === 'GET' && parts.length === 1 && ctx.query['list-type'] === '2' && (await ctx.app.store.getBucket(bucket))) {
      await listObjectsV2(ctx, bucket);
      return;
    }
    const uploadId = ctx.query.uploadId;
    if ((ctx.method !== 'DELETE' && ctx.method !== 'GET') || parts.length < 2 || typeof uploadId !== 'string') return next();
    const key = decodeURIComponent(parts.slice(1).join('/'));
    const found = (await uploadsOf(directory, bucket)).find((u) => u.uploadId === uploadId && u.key === key);
    ctx.type = 'application/xml';
    if (!found) {
      ctx.status = 404;
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>`;
      return;
    }
    const dir = path.join(directory, bucket, UPLOADS, found.uploadId);
    if (ctx.method === 'DELETE') {
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      ctx.body = null;
      return;
    }
    const numbers = (await readdir(dir)).filter((f) => /^\d+$/.test(f)).map(Number).sort((a, b) => a - b);
    let xmlParts = '';
    for (const n of numbers) {
      const [info, md5] = await Promise.all([stat(path.join(dir, String(n))), readFile(path.join(dir, `${n}.md5`), 'utf8').catch(() => '')]);
      xmlParts += `<Part><PartNumber>${n}</PartNumber><ETag>"${md5}"</ETag><Size>${info.size}</Size><LastModified>${info.mtime.toISOString()}</LastModified></Part>`;
    }
    ctx.status = 200;
    ctx.body =
      '<?xml version="1.0" encoding="UTF-8"?>\n<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      `<Bucket>${xmlEscape(bucket)}</Bucket><Key>${xmlEscape(key)}</Key><UploadId>${xmlEscape(found.uploadId)}</UploadId><IsTruncated>false</IsTruncated>` +
      xmlParts +
      '</ListPartsResult>';
  };
}

/** ListObjectsV2 over s3rver's store; the continuation token is the last key, base64url. */
async function listObjectsV2(ctx: KoaContext, bucket: string): Promise<void> {
  const q = (name: string) => (typeof ctx.query[name] === 'string' ? (ctx.query[name] as string) : '');
  const token = q('continuation-token');
  const prefix = q('prefix');
  const delimiter = q('delimiter');
  const maxKeys = Math.min(1000, Number(q('max-keys') || 1000));
  const startAfter = token ? Buffer.from(token, 'base64url').toString('utf8') : q('start-after');
  const result = await ctx.app.store.listObjects(bucket, { prefix, startAfter, maxKeys, delimiter });
  const last = result.objects.at(-1)?.key;
  const next = result.isTruncated && last !== undefined ? Buffer.from(last, 'utf8').toString('base64url') : undefined;
  ctx.status = 200;
  ctx.type = 'application/xml';
  ctx.body =
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Name>${xmlEscape(bucket)}</Name><Prefix>${xmlEscape(prefix)}</Prefix><KeyCount>${result.objects.length}</KeyCount><MaxKeys>${maxKeys}</MaxKeys>` +
    (delimiter ? `<Delimiter>${xmlEscape(delimiter)}</Delimiter>` : '') +
    `<IsTruncated>${result.isTruncated}</IsTruncated>` +
    (token ? `<ContinuationToken>${xmlEscape(token)}</ContinuationToken>` : '') +
    (next ? `<NextContinuationToken>${next}</NextContinuationToken>` : '') +
    result.objects
      .map((o) => `<Contents><Key>${xmlEscape(o.key)}</Key><LastModified>${o.lastModifiedDate.toISOString()}</LastModified><ETag>${xmlEscape(o.metadata.etag ?? '')}</ETag><Size>${o.size}</Size><StorageClass>STANDARD</StorageClass></Contents>`)
      .join('') +
    result.commonPrefixes.map((p) => `<CommonPrefixes><Prefix>${xmlEscape(p)}</Prefix></CommonPrefixes>`).join('') +
    '</ListBucketResult>';
}
