// Streaming multipart/form-data (storage uploads): each file part is handed to `onFile` as a
// stream while the request is still arriving, so nothing is buffered whole, in memory or on
// disk. Parts arrive in order; busboy emits the next part only once the current one is consumed.
import type { Readable } from 'node:stream';
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

/**
 * Parses the request's multipart body. `fileFields`: the file fields accepted (another one is a
 * 400 naming it); `maxFiles`: more file parts than that is a 400. A file whose `onFile` fails is
 * drained and reported in `files`; the request goes on.
 */
export function streamMultipart<T>(ctx: AppContext, options: { fileFields: string[]; maxFiles: number }, onFile: (part: FilePart) => Promise<T>): Promise<MultipartResult<T>> {
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
    // A refusal of the request as a whole: parsing goes on to the end (the rest is skipped), then it is thrown.
    const fail = (err: DomainError) => void (failed ??= err);
    const settle = () => Promise.all(files);
    bb.on('field', (name, value) => (fields[name] ??= []).push(value));
    bb.on('file', (field, stream, info) => {
      if (failed || !options.fileFields.includes(field)) {
        stream.resume();
        if (!options.fileFields.includes(field)) fail(validationError({ [field]: [`Unknown file field: send the file as ${options.fileFields.map((f) => `"${f}"`).join(' or ')}.`] }));
        return;
      }
      active.add(stream);
      stream.once('close', () => active.delete(stream));
      const part = { field, filename: info.filename ?? '', mimeType: info.mimeType };
      files.push(
        onFile({ ...part, stream }).then(
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
      const err = new DomainError('BAD_REQUEST', message);
      for (const stream of active) stream.destroy(err);
      void settle().then((done) => reject(Object.assign(err, { files: done })));
    };
    bb.on('error', () => broken('Malformed multipart body.'));
    ctx.req.on('aborted', () => broken('The upload was aborted.'));
    bb.on('close', () => {
      void settle().then((done) => (failed ? reject(Object.assign(failed, { files: done })) : resolve({ fields, files: done })));
    });
    ctx.req.pipe(bb);
  });
}
