// A request body written whole to a temporary file before the work that needs it starts: a slow
// client then holds nothing shared (no pooled connection, no transaction, no slot) while its bytes
// trickle in, and the work reads a local file at disk speed. The file is at most `maxBytes` (the
// caller's error as soon as one byte more arrives; the rest of the body is read and dropped, so
// the answer still gets through), readable by this process only, and removed by `remove()` (or at
// once when spooling fails). A full disk fails with its ENOSPC (answered 507).
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';

export interface Spooled {
  bytes: number;
  /** A new stream of the spooled bytes. */
  open(): Readable;
  /** Deletes the file. */
  remove(): Promise<void>;
}

export async function spool(input: Readable, maxBytes: number, tooLarge: () => Error): Promise<Spooled> {
  const file = path.join(os.tmpdir(), `platform-spool-${randomUUID()}`);
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      callback(bytes > maxBytes ? tooLarge() : null, chunk);
    },
  });
  const out = createWriteStream(file, { flags: 'wx', mode: 0o600 });
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (err: Error) => {
        input.unpipe(counter);
        if (!input.readableEnded && !input.destroyed) input.resume(); // drain: the client reads the refusal
        counter.destroy();
        out.destroy();
        reject(err);
      };
      input.once('error', fail);
      counter.once('error', fail);
      out.once('error', fail);
      out.once('close', () => (out.writableFinished ? resolve() : undefined));
      input.pipe(counter).pipe(out);
    });
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
  return { bytes, open: () => createReadStream(file), remove: () => rm(file, { force: true }) };
}
