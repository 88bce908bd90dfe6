// Test fixtures for frontend workers: archives of small sites (zip with adm-zip, tar and tar.gz
// with node-tar) and multipart bodies carrying them.
import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import AdmZip from 'adm-zip';
import * as tar from 'tar';

export type SiteFiles = Record<string, string | Buffer>;

export const spaSite = (version: string): SiteFiles => ({
  'index.html': `<!doctype html><html><head><title>Shop ${version}</title><script src="/assets/app-3f9a1b2c.js"></script></head><body><div id="app">${version}</div></body></html>`,
  'assets/app-3f9a1b2c.js': `window.VERSION = ${JSON.stringify(version)};\n${'console.log("padding so that compression pays");\n'.repeat(60)}`,
  'assets/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>',
  '404.html': `<!doctype html><title>Missing ${version}</title>`,
});

export function zipOf(files: SiteFiles): Buffer {
  const zip = new AdmZip();
  for (const [name, content] of Object.entries(files)) zip.addFile(name, Buffer.isBuffer(content) ? content : Buffer.from(content));
  return zip.toBuffer();
}

export async function tarOf(files: SiteFiles, gzip: boolean): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'worker-site-'));
  try {
    for (const [name, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
      await writeFile(path.join(dir, name), content);
    }
    const out = path.join(os.tmpdir(), `worker-${randomBytes(4).toString('hex')}.tar${gzip ? '.gz' : ''}`);
    await tar.c({ gzip, cwd: dir, file: out, portable: true }, Object.keys(files));
    const bytes = await readFile(out);
    await rm(out, { force: true });
    return bytes;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A multipart/form-data body: the fields, then the file under `file`. */
export function multipart(fields: Record<string, string>, file?: { filename: string; bytes: Buffer }): { raw: Buffer; headers: Record<string, string> } {
  const boundary = `----worker${randomBytes(8).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  if (file) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`), file.bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { raw: Buffer.concat(parts), headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` } };
}
