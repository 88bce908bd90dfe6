// The S3 store (any S3-compatible service, through the minio client). One bucket for every site
// with keys under `{schema}/`, or one bucket per site (`{bucket}-{schema}`). docs/storage.md.
//
// Uploads do not go through minio's putObject: in minio 8.0.7 a body that errors is never
// listened to (an uncaught exception) and one that is destroyed leaves the call pending for
// ever, a multipart upload is never aborted, an unknown size buffers a whole ~500 MiB part, and
// every multipart upload first lists the bucket's incomplete uploads to resume one. Here the body
// is cut into parts of `partSize` bytes (at most two in memory): one part is a single PUT; more
// are a multipart upload, aborted when anything fails. S3 only shows an object once its PUT or
// CompleteMultipartUpload succeeds, so a failed upload leaves nothing under the key.
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Client, CopyDestinationOptions, CopySourceOptions, type ClientOptions } from 'minio';
import { isValidSchemaName } from '../../tenancy/schema.ts';
import { assertKey, assertPrefix } from './keys.ts';
import { siteBucketName, validBucketName } from './s3-names.ts';
import { BlobNotFound, InvalidRange, type BlobStat, type ByteRange, type ObjectStore, type PutResult, type SiteStore } from './types.ts';

export { siteBucketName, validBucketName } from './s3-names.ts';

export interface S3Options {
  /** `http(s)://host[:port]` of the service. */
  endpoint: string;
  accessKey: string;
  secretKey: string;
  region: string;
  /** Path-style addressing (`host/bucket/key`), as MinIO and most self-hosted services need. */
  pathStyle: boolean;
  /** The bucket (shared mode) or the prefix of the per-site buckets. */
  bucket: string;
  /** One bucket per site, named by siteBucketName(bucket, schema). */
  bucketPerSite: boolean;
  /** Bytes per multipart part (at least 5 MiB, S3's minimum; default 8 MiB). */
  partSize?: number;
}

export interface S3ObjectStore extends ObjectStore {
  readonly kind: 's3';
  readonly client: Client;
  /** Where a site's objects live: the bucket, and the key prefix inside it (`''` per-site). */
  location(schema: string): { bucket: string; prefix: string };
}

const MIB = 1024 * 1024;
export const MIN_PART_SIZE = 5 * MIB;
export const DEFAULT_PART_SIZE = 8 * MIB;
const MAX_PARTS = 10_000;
const DELETE_BATCH = 1000;

/** The minio client options of an endpoint URL and credentials. */
export function s3ClientOptions(options: S3Options): ClientOptions {
  const url = new URL(options.endpoint);
  const useSSL = url.protocol === 'https:';
  return {
    endPoint: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : useSSL ? 443 : 80,
    useSSL,
    accessKey: options.accessKey,
    secretKey: options.secretKey,
    region: options.region,
    pathStyle: options.pathStyle,
  };
}

export function s3Store(options: S3Options): S3ObjectStore {
  const partSize = options.partSize ?? DEFAULT_PART_SIZE;
  if (partSize < MIN_PART_SIZE) throw new Error(`S3 part size must be at least ${MIN_PART_SIZE} bytes.`);
  if (!validBucketName(options.bucket)) throw new Error(`Invalid S3 bucket name ${JSON.stringify(options.bucket)}.`);
  const client = new Client(s3ClientOptions(options));
  const ready = new Map<string, Promise<void>>();

  /** Creates the bucket on first use (once per process; a failure is retried next time). */
  const ensureBucket = (bucket: string): Promise<void> => {
    let p = ready.get(bucket);
    if (!p) {
      p = (async () => {
        if (await client.bucketExists(bucket)) return;
        try {
          await client.makeBucket(bucket, options.region);
        } catch (e) {
          // Another process made it meanwhile (services answer one or the other code).
          if (!['BucketAlreadyOwnedByYou', 'BucketAlreadyExists'].includes(s3Code(e)) || !(await client.bucketExists(bucket))) throw e;
        }
      })();
      p.catch(() => ready.delete(bucket));
      ready.set(bucket, p);
    }
    return p;
  };

  const location = (schema: string) => {
    if (!isValidSchemaName(schema)) throw new Error(`Invalid site schema name ${JSON.stringify(schema)}.`);
    return options.bucketPerSite ? { bucket: siteBucketName(options.bucket, schema), prefix: '' } : { bucket: options.bucket, prefix: `${schema}/` };
  };

  return {
    kind: 's3',
    client,
    location,
    site: (schema) => new S3SiteStore(client, location(schema), partSize, ensureBucket),
    async close() {},
  };
}

const s3Code = (e: unknown): string => String((e as { code?: unknown } | null)?.code ?? '');
const MISSING = new Set(['NoSuchKey', 'NoSuchBucket', 'NotFound']);
const quote = (etag: string): string => `"${etag.replace(/^"|"$/g, '')}"`;

class S3SiteStore implements SiteStore {
  readonly #client: Client;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #partSize: number;
  readonly #ensure: (bucket: string) => Promise<void>;

  constructor(client: Client, where: { bucket: string; prefix: string }, partSize: number, ensure: (bucket: string) => Promise<void>) {
    this.#client = client;
    this.#bucket = where.bucket;
    this.#prefix = where.prefix;
    this.#partSize = partSize;
    this.#ensure = ensure;
  }

  #name(key: string): string {
    return this.#prefix + assertKey(key);
  }

  /** One PUT each, 8 at a time (an object is whole or absent in S3: nothing to make durable beyond it). */
  async putMany(items: { key: string; data: Buffer; contentType: string }[]): Promise<void> {
    const queue = [...items];
    const next = async (): Promise<void> => {
      for (let item = queue.shift(); item; item = queue.shift()) await this.put(item.key, Readable.from([item.data]), { contentType: item.contentType, size: item.data.length });
    };
    await Promise.all(Array.from({ length: Math.min(8, queue.length) }, next));
  }

  async put(key: string, body: Readable, options: { contentType: string; size?: number }): Promise<PutResult> {
    const name = this.#name(key);
    const headers = { 'Content-Type': options.contentType };
    // Parts grow with the declared size (S3 allows 10,000); without one they double every 1,000 parts.
    const base = options.size ? Math.max(this.#partSize, Math.ceil(options.size / MAX_PARTS / MIB) * MIB) : this.#partSize;
    const parts = cut(body, (n) => base * 2 ** Math.floor((n - 1) / 1000))[Symbol.asyncIterator]();
    const check = (size: number) => {
      if (options.size !== undefined && size !== options.size) throw new Error(`Expected ${options.size} bytes, received ${size}.`);
    };
    let uploadId: string | undefined;
    let inFlight: Promise<unknown> | undefined;
    try {
      await this.#ensure(this.#bucket);
      const first = await parts.next();
      const second = first.done ? first : await parts.next();
      if (second.done) {
        const data = first.done ? Buffer.alloc(0) : first.value;
        check(data.length);
        const res = await this.#client.putObject(this.#bucket, name, data, data.length, headers);
        return { size: data.length, etag: quote(res.etag) };
      }
      uploadId = await this.#client.initiateNewMultipartUpload(this.#bucket, name, headers);
      const etags: { part: number; etag: string }[] = [];
      let size = 0;
      let current = first.value as Buffer;
      let following: Promise<IteratorResult<Buffer>> = Promise.resolve(second);
      for (let part = 1; ; part++) {
        size += current.length;
        // This part travels while the next one is read: two parts in memory at most.
        const upload = this.#uploadPart(name, uploadId, part, current);
        inFlight = upload;
        const [etag, next] = await Promise.all([upload, following]);
        inFlight = undefined;
        etags.push({ part, etag });
        if (next.done) break;
        current = next.value;
        following = parts.next();
      }
      check(size);
      const done = await this.#client.completeMultipartUpload(this.#bucket, name, uploadId, etags);
      uploadId = undefined;
      return { size, etag: quote(done.etag) };
    } catch (e) {
      if (!body.destroyed) body.destroy();
      await parts.return?.(undefined).catch(() => {});
      // A part still travelling could land after the abort and keep storage: let it settle first.
      await inFlight?.catch(() => {});
      if (uploadId !== undefined) await this.#client.abortMultipartUpload(this.#bucket, name, uploadId).catch(() => {});
      throw e;
    }
  }

  async #uploadPart(name: string, uploadId: string, part: number, data: Buffer): Promise<string> {
    const headers = { 'Content-Length': data.length, 'Content-MD5': createHash('md5').update(data).digest('base64') };
    const res = await this.#client.uploadPart({ bucketName: this.#bucket, objectName: name, uploadID: uploadId, partNumber: part, headers }, data);
    return res.etag;
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const name = this.#name(key);
    if (range && !(Number.isSafeInteger(range.start) && Number.isSafeInteger(range.end) && range.start >= 0 && range.end >= range.start)) {
      throw new InvalidRange(key, range);
    }
    try {
      return range
        ? await this.#client.getPartialObject(this.#bucket, name, range.start, range.end - range.start + 1)
        : await this.#client.getObject(this.#bucket, name);
    } catch (e) {
      if (MISSING.has(s3Code(e))) throw new BlobNotFound(key);
      if (range && s3Code(e) === 'InvalidRange') throw new InvalidRange(key, range);
      throw e;
    }
  }

  async stat(key: string): Promise<BlobStat | null> {
    try {
      const info = await this.#client.statObject(this.#bucket, this.#name(key));
      return { size: info.size, etag: quote(info.etag) };
    } catch (e) {
      if (MISSING.has(s3Code(e))) return null;
      throw e;
    }
  }

  async copy(from: string, to: string): Promise<void> {
    const source = this.#name(from);
    const target = this.#name(to);
    await this.#ensure(this.#bucket);
    try {
      await this.#client.copyObject(
        new CopySourceOptions({ Bucket: this.#bucket, Object: source }),
        new CopyDestinationOptions({ Bucket: this.#bucket, Object: target }),
      );
    } catch (e) {
      if (MISSING.has(s3Code(e))) throw new BlobNotFound(from);
      throw e;
    }
  }

  async delete(keys: string[]): Promise<void> {
    await this.#removeNames(keys.map((k) => this.#name(k)));
  }

  async #removeNames(names: string[]): Promise<void> {
    for (let i = 0; i < names.length; i += DELETE_BATCH) {
      let results;
      try {
        results = await this.#client.removeObjects(this.#bucket, names.slice(i, i + DELETE_BATCH));
      } catch (e) {
        if (s3Code(e) === 'NoSuchBucket') return;
        throw e;
      }
      // minio returns the DeleteResult's <Error> entries ({Code, Message, Key}).
      const failed = (results as unknown as ({ Code?: string; Key?: string; Message?: string } | null)[]).find((r) => r?.Code && r.Code !== 'NoSuchKey');
      if (failed) throw new Error(`S3 could not delete "${failed.Key}": ${failed.Code} ${failed.Message ?? ''}`.trim());
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertPrefix(prefix);
    let batch: string[] = [];
    for await (const name of this.#listNames(this.#prefix + prefix)) {
      batch.push(name);
      if (batch.length === DELETE_BATCH) {
        await this.#removeNames(batch);
        batch = [];
      }
    }
    await this.#removeNames(batch);
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertPrefix(prefix);
    for await (const name of this.#listNames(this.#prefix + prefix)) yield name.slice(this.#prefix.length);
  }

  async *#listNames(prefix: string): AsyncGenerator<string> {
    const stream = this.#client.listObjectsV2(this.#bucket, prefix, true);
    try {
      for await (const item of stream as AsyncIterable<{ name?: string }>) {
        if (item.name !== undefined) yield item.name;
      }
    } catch (e) {
      if (s3Code(e) !== 'NoSuchBucket') throw e;
    }
  }
}

/**
 * The body as parts: part n (1-based) holds sizeFor(n) bytes, the last one what is left. Holds at
 * most one part (plus the chunk being read); reading pauses while the consumer does not ask.
 */
async function* cut(body: Readable, sizeFor: (n: number) => number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingLength = 0;
  let n = 1;
  for await (const chunk of body) {
    let buf: Buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    while (buf.length > 0) {
      const want = sizeFor(n) - pendingLength;
      if (buf.length < want) {
        pending.push(buf);
        pendingLength += buf.length;
        break;
      }
      pending.push(buf.subarray(0, want));
      buf = buf.subarray(want);
      yield Buffer.concat(pending);
      pending = [];
      pendingLength = 0;
      n++;
    }
  }
  if (pendingLength > 0) yield Buffer.concat(pending);
}
