// A multipart/form-data request body with one file, streamed from disk (its length known in
// advance, so the transport sends Content-Length), with a tap on the bytes sent (the CLI's
// progress): worker deploy's archive, app import's package.
import fs from 'node:fs';
import { Readable } from 'node:stream';
import type { ApiRequest } from './api.ts';

/** A multipart/form-data body of `fields` and the archive, streamed (its length known in advance), with a progress tap. */
export function multipartUpload(fields: Record<string, string | undefined>, file: { path: string; name: string; size: number } | undefined, sent: (n: number) => void): NonNullable<ApiRequest['upload']> {
  const boundary = `----platform${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
  const head = Buffer.from(
    Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join('') + (file ? `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name.replace(/["\r\n]/g, '_')}"\r\nContent-Type: application/octet-stream\r\n\r\n` : ''),
  );
  const tail = Buffer.from(`${file ? '\r\n' : ''}--${boundary}--\r\n`);
  async function* parts() {
    yield head;
    let n = 0;
    if (file) {
      for await (const chunk of fs.createReadStream(file.path)) {
        n += (chunk as Buffer).length;
        sent(n);
        yield chunk as Buffer;
      }
    }
    yield tail;
  }
  return { open: () => Readable.from(parts()), contentType: `multipart/form-data; boundary=${boundary}`, length: head.length + (file?.size ?? 0) + tail.length };
}
