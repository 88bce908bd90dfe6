// Deploy-time compression of a frontend-worker build's files: the brotli and gzip variants are
// computed once, stored beside the original, and chosen per request by Accept-Encoding
// (serving.ts). Only types that compress well are tried (already-compressed images, video,
// archives and woff/woff2 fonts are not), only files of 1 KiB or more (smaller ones gain less
// than the headers cost), and a variant is kept only when it saves at least 5 %. Brotli at quality
// 5 and gzip at level 6: a deploy of 5,000 files must take seconds (docs/benchmarks.md "Frontend
// workers"); quality 11 compresses ≈ 15 % smaller at ≈ 40 times the CPU (70 CPU-seconds for 36 MB
// of text here).
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';

const brotli = promisify(brotliCompress);
const gz = promisify(gzip);

const MIN_SIZE = 1024;
const MAX_RATIO = 0.95;
const BROTLI_QUALITY = 5;
const GZIP_LEVEL = 6;

const COMPRESSIBLE = new Set([
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'application/json',
  'application/xml',
  'application/wasm',
  'application/manifest+json',
  'application/vnd.ms-fontobject',
  'application/x-font-ttf',
  'image/svg+xml',
  'image/x-icon',
  'image/vnd.microsoft.icon',
  'image/bmp',
  'font/ttf',
  'font/otf',
]);

/** Whether a media type (parameters ignored) is worth compressing. */
export function compressible(type: string): boolean {
  const t = type.split(';')[0]!.trim().toLowerCase();
  return t.startsWith('text/') || COMPRESSIBLE.has(t) || (t.startsWith('application/') && (t.endsWith('+json') || t.endsWith('+xml')));
}

/** The br and gz variants of `data` that qualify (see the header comment); `{}` when none does. */
export async function precompress(data: Buffer, type: string): Promise<{ br?: Buffer; gz?: Buffer }> {
  if (data.length < MIN_SIZE || !compressible(type)) return {};
  const [br, gzipped] = await Promise.all([
    brotli(data, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
        [constants.BROTLI_PARAM_SIZE_HINT]: data.length,
        [constants.BROTLI_PARAM_MODE]: type.startsWith('text/') ? constants.BROTLI_MODE_TEXT : constants.BROTLI_MODE_GENERIC,
      },
    }),
    gz(data, { level: GZIP_LEVEL }),
  ]);
  const worth = (b: Buffer) => b.length <= data.length * MAX_RATIO;
  return { ...(worth(br) && { br }), ...(worth(gzipped) && { gz: gzipped }) };
}
