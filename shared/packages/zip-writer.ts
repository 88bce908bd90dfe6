// Writes a ZIP as a stream (yazl), entry after entry, each hashed as it passes: memory stays flat
// whatever the files weigh (a bucket of 2 GB is read from the store and written through). An
// entry is added only once the one before it is written, so its digest is known when the next
// (the metadata that lists it) is made. The archive's own size and SHA-256 come with `finish()`.
import { createHash } from 'node:crypto';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import { sha256 } from './layout.ts';

export interface ZipResult {
  size: number;
  /** `sha256:<hex>` of the archive's bytes. */
  checksum: string;
}

/** A transform that hashes (and counts) what passes through it. */
function hashing(): Transform & { digest(): string; size(): number } {
  const hash = createHash('sha256');
  let size = 0;
  const t = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  }) as Transform & { digest(): string; size(): number };
  let hex: string | undefined;
  t.digest = () => `sha256:${(hex ??= hash.digest('hex'))}`;
  t.size = () => size;
  return t;
}

export class ZipWriter {
  private readonly zip = new yazl.ZipFile();
  private readonly written: Promise<ZipResult>;
  private readonly mtime: Date;
  private failed: Error | undefined;

  /** Writes the archive into `out`; every entry carries `mtime` (one export, one time). */
  constructor(out: Writable, mtime: Date) {
    this.mtime = mtime;
    const whole = hashing();
    this.written = pipeline(this.zip.outputStream as Readable, whole, out).then(() => ({ size: whole.size(), checksum: whole.digest() }));
    this.written.catch(() => undefined); // awaited by finish()
  }

  /** An entry from memory; its digest. */
  addBuffer(name: string, data: Buffer, compress = true): string {
    this.zip.addBuffer(data, name, { mtime: this.mtime, compress });
    return sha256(data);
  }

  /** An entry of JSON (two-space indented, as people read it); its digest. */
  addJson(name: string, value: unknown): string {
    return this.addBuffer(name, Buffer.from(`${JSON.stringify(value, null, 2)}\n`));
  }

  /**
   * An entry streamed from `source`, resolved with its digest and size once all of it is in the
   * archive; a failing source fails the archive (finish() rejects).
   */
  addStream(name: string, source: Readable, compress: boolean): Promise<{ digest: string; size: number }> {
    const tap = hashing();
    return new Promise((resolve, reject) => {
      const fail = (err: Error) => {
        this.failed ??= err;
        (this.zip.outputStream as Readable).destroy(err);
        reject(err);
      };
      source.on('error', fail);
      tap.on('error', fail);
      tap.on('end', () => resolve({ digest: tap.digest(), size: tap.size() }));
      source.pipe(tap);
      this.zip.addReadStream(tap, name, { mtime: this.mtime, compress });
    });
  }

  /** Ends the archive (the central directory); its size and checksum once all of it is written. */
  async finish(): Promise<ZipResult> {
    if (this.failed) throw this.failed;
    this.zip.end();
    return this.written;
  }

  /** Abandons the archive: the output is destroyed. */
  abort(err: Error): void {
    this.failed ??= err;
    (this.zip.outputStream as Readable).destroy(err);
  }
}
