// Streaming multipart/form-data (storage uploads): each file part is handed to `onFile` as a
// stream while the request is still arriving, so nothing is buffered whole, in memory or on
// disk. Parts arrive in order; busboy emits the next part only once the current one is consumed.
import { Transform, type Readable } from 'node:stream';
import busboy from 'busboy';
import { DomainError, validationError } from '../../shared/errors.ts';
import type { AppContext } from './types.ts';

export interface FilePart {
  field: string;
  filename: string;
  mimeType: string;
  stream: Readable;
}

export interface MultipartResult<T> {
  /** Text fields (every value of a repeated one, in order). */
  fields: Record<string, string[]>;
  /** Per file part, in order: what `onFile` returned, or the error it threw. */
  files: { field: string; filename: string; result?: T; error?: unknown }[];
}

export const isMultipart = (ctx: AppContext): boolean => ctx.is('multipart/form-data') === 'multipart/form-data';

export interface MultipartOptions {
  /** The file fields accepted: another one is a 400 naming it. */
  fileFields: string[];
  /** More file parts than that is a 400. */
  maxFiles: number;
  /**
   * The bytes all files may have together, and the error past it: the moment the files' running
   * total passes it, every file still streaming fails with that error, the rest of the body is
   * not read, the answer closes the connection, and the request fails once the files' `onFile`
   * settled (their stored results are in the error's `files`, for the caller to remove).
   */
  maxTotal?: { bytes: number; error: () => DomainError };
}

/**
 * Parses the request's multipart body (MultipartOptions). A file whose `onFile` fails is drained
 * and reported in `files`; the request goes on.
 */
export function streamMultipart<T>(ctx: AppContext, options: MultipartOptions, onFile: (part: FilePart) => Promise<T>): Promise<MultipartResult<T>> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: ctx.req.headers, limits: { files: options.maxFiles, fields: 100, fieldSize: 1024 * 1024, parts: options.maxFiles + 100 }, defParamCharset: 'utf8' });
    } catch {
      reject(new DomainError('BAD_REQUEST', 'Malformed multipart body (no boundary).'));
      return;
    }
    const fields: Record<string, string[]> = {};
    const files: Promise<MultipartResult<T>['files'][number]>[] = [];
    const active = new Set<Readable>();
    let failed: DomainError | undefined;
    let stopped = false;
    // A refusal of the request as a whole: parsing goes on to the end (the rest is skipped), then it is thrown.
    const fail = (err: DomainError) => void (failed ??= err);
    const settle = () => Promise.all(files);
    // A refusal at once: nothing more is read; the files being streamed fail with `err`.
    const stop = (err: DomainError) => {
      if (stopped) return;
      stopped = true;
      ctx.req.unpipe(bb);
      ctx.req.pause();
      ctx.set('Connection', 'close');
      for (const stream of active) stream.destroy(err);
      void settle().then((done) => reject(Object.assign(err, { files: done })));
    };
    let total = 0;
    /** The part as `onFile` reads it: counted against maxTotal when there is one. */
    const counted = (stream: Readable): Readable => {
      const max = options.maxTotal;
      if (!max) return stream;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          total += chunk.length;
          if (total <= max.bytes) return done(null, chunk);
          done();
          stop(max.error());
        },
      });
      stream.once('error', (err) => counter.destroy(err));
      return stream.pipe(counter);
    };
    bb.on('field', (name, value) => (fields[name] ??= []).push(value));
    bb.on('file', (field, stream, info) => {
      if (failed || !options.fileFields.includes(field)) {
        stream.resume();
        if (!options.fileFields.includes(field)) fail(validationError({ [field]: [`Unknown file field: send the file as ${options.fileFields.map((f) => `"${f}"`).join(' or ')}.`] }));
        return;
      }
      const body = counted(stream);
      active.add(body);
      body.once('close', () => active.delete(body));
      const part = { field, filename: info.filename ?? '', mimeType: info.mimeType };
      files.push(
        onFile({ ...part, stream: body }).then(
          (result) => ({ field, filename: part.filename, result }),
          (error) => {
            stream.resume(); // drain the rest so the next part arrives
            return { field, filename: part.filename, error };
          },
        ),
      );
    });
    bb.on('filesLimit', () => fail(validationError({ files: [`At most ${options.maxFiles} file${options.maxFiles === 1 ? '' : 's'} per request.`] })));
    bb.on('partsLimit', () => fail(new DomainError('BAD_REQUEST', 'Too many parts in the multipart body.')));
    bb.on('fieldsLimit', () => fail(new DomainError('BAD_REQUEST', 'Too many fields in the multipart body.')));
    // A malformed or cut-off body: the files being streamed fail (their uploads are undone), then the request.
    const broken = (message: string) => {
      if (stopped) return;
      const err = new DomainError('BAD_REQUEST', message);
      for (const stream of active) stream.destroy(err);
      void settle().then((done) => reject(Object.assign(err, { files: done })));
    };
    bb.on('error', () => broken('Malformed multipart body.'));
    ctx.req.on('aborted', () => broken('The upload was aborted.'));
    bb.on('close', () => {
      if (stopped) return;
      void settle().then((done) => (failed ? reject(Object.assign(failed, { files: done })) : resolve({ fields, files: done })));
    });
    ctx.req.pipe(bb);
  });
}
