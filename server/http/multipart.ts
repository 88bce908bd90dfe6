// multipart/form-data bodies (form fields and one uploaded file), for the routes that take an
// upload. koa-body (formidable) writes the file into a directory of this request's own under
// `tmpDir`; withMultipart lends it on disk to the caller (archives are read from there),
// parseMultipart reads it into memory; the directory is removed afterwards, a refused oversized
// upload's too.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { DomainError } from '../../shared/errors.ts';
import type { AppContext } from './types.ts';

export interface UploadedFile {
  bytes: Buffer;
  filename: string;
}

export interface MultipartOptions {
  /** The directory the per-request upload directories are made in. */
  tmpDir: string;
  /** The one file field accepted: another file field is a 400 naming it. */
  fileField: string;
  /** Bytes the file may have. */
  maxFileSize: number;
  /** The error of a file larger than that. */
  tooLarge: () => DomainError;
}

/** The first value of a repeated form field (or file), the value itself otherwise. */
const first = (v: unknown): unknown => (Array.isArray(v) ? v[0] : v);

/** A form's fields (the first value of each, as sent: strings) and its file on disk, if one came. */
export interface MultipartForm {
  fields: Record<string, unknown>;
  file?: { path: string; filename: string };
}

/** Parses the request's multipart body and lends it to `use`; the uploaded file is removed when `use` ends. */
export async function withMultipart<T>(ctx: AppContext, options: MultipartOptions, use: (form: MultipartForm) => Promise<T>): Promise<T> {
  const uploadDir = path.join(options.tmpDir, randomUUID());
  await mkdir(uploadDir, { recursive: true });
  try {
    const { koaBody } = await import('koa-body'); // loaded by the first upload, not with the app (middleware.ts: bodyParser)
    try {
      await koaBody({
        multipart: true,
        json: false,
        urlencoded: false,
        text: false,
        parsedMethods: [ctx.method] as never,
        formidable: { maxFileSize: options.maxFileSize, maxFiles: 1, uploadDir, keepExtensions: false },
      })(ctx as never, async () => {});
    } catch (err) {
      const e = err as { httpCode?: number; status?: number; message?: string };
      if (e.httpCode === 413 || e.status === 413 || /maxFileSize|maxTotalFileSize|exceeded/i.test(String(e.message))) throw options.tooLarge();
      throw new DomainError('BAD_REQUEST', 'Malformed multipart body.');
    }
    const files = (ctx.request as { files?: Record<string, unknown> }).files ?? {};
    const unknown = Object.keys(files).filter((k) => k !== options.fileField);
    if (unknown.length) throw new DomainError('VALIDATION_ERROR', 'Invalid input.', { errors: Object.fromEntries(unknown.map((k) => [k, ['Unknown file field.']])) });
    const file = first(files[options.fileField]) as { filepath: string; originalFilename?: string | null } | undefined;
    const raw = ((ctx.request as { body?: Record<string, unknown> }).body ?? {}) as Record<string, unknown>;
    const fields = Object.fromEntries(Object.entries(raw).map(([key, value]) => [key, first(value)]));
    return await use({ fields, file: file ? { path: file.filepath, filename: file.originalFilename ?? '' } : undefined });
  } finally {
    await rm(uploadDir, { recursive: true, force: true });
  }
}

/** Parses the request's multipart body: its fields and the file, if one came, in memory. */
export function parseMultipart(ctx: AppContext, options: MultipartOptions): Promise<{ fields: Record<string, unknown>; file?: UploadedFile }> {
  return withMultipart(ctx, options, async ({ fields, file }) => ({ fields, file: file ? { bytes: await readFile(file.path), filename: file.filename } : undefined }));
}
