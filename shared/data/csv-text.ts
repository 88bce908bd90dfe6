// The text of an imported CSV (records-csv.ts; docs/data-tables.md "CSV export and import"): its
// encoding and its delimiter. UTF-8, the default, is checked as the bytes pass and handed on
// undecoded (fast-csv decodes them); any other encoding that TextDecoder knows is decoded to text
// as it streams. A byte sequence that is not valid in the encoding is a 400 naming the encoding,
// where it is (byte offset, line) and what to do. A file without a given encoding that starts with
// a UTF-16 byte-order mark is read as UTF-16 (spreadsheets' "Unicode text"). The delimiter is the
// one given, else the one of `,` `;` tab that the header line holds most (`,` when none or tied).
import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import { DomainError, fieldError } from '../errors.ts';

/** The delimiters sniffed from the header line, in the order that breaks ties. */
const SNIFFED_DELIMITERS = [',', ';', '\t'] as const;
/** At most this much of the file is read to find the header line. */
const HEAD_BYTES = 64 * 1024;
const LF = 0x0a;

/** A delimiter as messages show it: `tab`, else quoted. */
export const delimiterName = (d: string): string => (d === '\t' ? 'tab' : JSON.stringify(d));

/** `delimiter` as given: one character other than a quote or a line break; `tab` (or `\t`) for a tab. */
export function delimiterOption(value: string): string {
  const d = value === 'tab' || value === '\\t' ? '\t' : value;
  if (d.length !== 1 || d === '"' || d === '\r' || d === '\n') throw fieldError('delimiter', `Expected one character such as ";" or "|", or "tab"; got ${JSON.stringify(value)}.`);
  return d;
}

/** `encoding` as given: any label of the WHATWG Encoding Standard, as its canonical name (`latin1` → `windows-1252`). */
export function encodingOption(value: string): string {
  try {
    return new TextDecoder(value).encoding;
  } catch {
    throw fieldError('encoding', `Unknown encoding ${JSON.stringify(value)}: use utf-8 (the default), latin1 (read as windows-1252), utf-16le or another WHATWG encoding label.`);
  }
}

/** The delimiter of a header line: the one of SNIFFED_DELIMITERS it holds most outside quotes; `,` when none. */
function sniffDelimiter(line: string): string {
  const counts = new Map<string, number>(SNIFFED_DELIMITERS.map((d) => [d, 0]));
  let quoted = false;
  for (const ch of line) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  let best: string = SNIFFED_DELIMITERS[0];
  for (const d of SNIFFED_DELIMITERS) if (counts.get(d)! > counts.get(best)!) best = d;
  return best;
}

/** The line breaks in `b` before `end`. */
function countLines(b: Buffer | string, end = b.length): number {
  let n = 0;
  for (let i = b.indexOf('\n'); i !== -1 && i < end; i = b.indexOf('\n', i + 1)) n++;
  return n;
}

/** The index of the first byte of `b` that does not start a valid UTF-8 sequence (RFC 3629), or -1. */
function firstInvalidUtf8(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    const more = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (!more || i + more >= b.length) return i;
    const c1 = b[i + 1]!;
    // Overlong forms, surrogates and code points past U+10FFFF.
    if ((c === 0xe0 && c1 < 0xa0) || (c === 0xed && c1 > 0x9f) || (c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return i;
    for (let k = 1; k <= more; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += more + 1;
  }
  return -1;
}

/** The length of `b` without a multi-byte sequence cut off at its end (its bytes come with the next chunk). */
function wholeLength(b: Buffer): number {
  for (let i = b.length - 1; i >= Math.max(0, b.length - 4); i--) {
    const c = b[i]!;
    if ((c & 0xc0) === 0x80) continue; // a continuation byte: look further back for its lead
    const need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return b.length - i < need ? i : b.length;
  }
  return b.length;
}

/** A 400 naming the encoding, where the file breaks it, and what to do. */
function badEncoding(encoding: string, where: string): DomainError {
  const text = `The file is not valid ${encoding === 'utf-8' ? 'UTF-8' : encoding} (${where}): save it as UTF-8, or give its encoding (encoding=latin1 for Latin-1/Windows-1252; CLI --encoding latin1).`;
  return new DomainError('VALIDATION_ERROR', text, { errors: { encoding: [text] } });
}

/** What happens to each chunk of the file: checked or decoded (a DomainError at the first invalid sequence). */
interface Reading {
  chunk(b: Buffer): Buffer | string;
  /** The end of the file: what is left (a sequence cut off there is invalid). */
  end(): string | undefined;
}

/** UTF-8 checked as the bytes pass (a sequence split between chunks is checked whole) and handed on unchanged. */
function utf8Checked(): Reading {
  let offset = 0; // bytes checked before `carry`
  let line = 1; // the line `carry` starts on
  let carry: Buffer | undefined;
  const fail = (b: Buffer, at: number) => badEncoding('utf-8', `byte offset ${offset + at}, line ${line + countLines(b, at)}`);
  return {
    chunk(chunk) {
      const b = carry ? Buffer.concat([carry, chunk]) : chunk;
      const whole = wholeLength(b);
      const part = whole === b.length ? b : b.subarray(0, whole);
      if (!isUtf8(part)) throw fail(part, firstInvalidUtf8(part));
      line += countLines(part);
      offset += whole;
      carry = whole === b.length ? undefined : Buffer.from(b.subarray(whole));
      return chunk;
    },
    end() {
      if (carry) throw fail(carry, 0);
      return undefined;
    },
  };
}

/** The bytes of `encoding` decoded to text as they pass (TextDecoder, fatal on a malformed sequence). */
function decoded(encoding: string): Reading {
  const decoder = new TextDecoder(encoding, { fatal: true });
  let offset = 0;
  let line = 1;
  const attempt = (bytes: number, decode: () => string): string => {
    let text: string;
    try {
      text = decode();
    } catch {
      // TextDecoder does not say where: the chunk's range.
      throw badEncoding(encoding, `between byte offsets ${offset} and ${offset + bytes}, from line ${line}`);
    }
    offset += bytes;
    line += countLines(text);
    return text;
  };
  return {
    chunk: (b) => attempt(b.length, () => decoder.decode(b, { stream: true })),
    end: () => attempt(0, () => decoder.decode()) || undefined,
  };
}

export interface CsvText {
  /** The file as UTF-8 bytes for the CSV parser (an error event at the first invalid sequence). */
  text: Readable;
  /** The encoding's canonical name (`utf-8`, `windows-1252`, `utf-16le`…). */
  encoding: string;
  delimiter: string;
}

/**
 * The CSV's text and delimiter: the head of `input` (up to its first line break, at most 64 KiB)
 * is read first, for a UTF-16 byte-order mark when no encoding is given and for the header line
 * when no delimiter is; then the whole input streams through the UTF-8 check or the decoder, as
 * the reader reads.
 */
export async function csvText(input: Readable, options: { encoding?: string; delimiter?: string }): Promise<CsvText> {
  const chunks = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const head: Buffer[] = [];
  for (let size = 0; size < HEAD_BYTES; ) {
    const next = await chunks.next();
    if (next.done) break;
    head.push(next.value);
    size += next.value.length;
    if (next.value.includes(LF)) break;
  }
  const first = head[0];
  const encoding =
    options.encoding ??
    (first?.[0] === 0xff && first[1] === 0xfe ? 'utf-16le' : first?.[0] === 0xfe && first[1] === 0xff ? 'utf-16be' : 'utf-8');
  const delimiter = options.delimiter ?? sniffDelimiter(new TextDecoder(encoding).decode(Buffer.concat(head)).split('\n', 1)[0]!);
  const reading = encoding === 'utf-8' ? utf8Checked() : decoded(encoding);
  async function* bytes() {
    yield* head;
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) yield next.value;
  }
  // Read only as the parser asks: a failure is an error event of `text` when its reader listens.
  async function* passed() {
    try {
      for await (const b of bytes()) {
        const out = reading.chunk(b);
        if (out.length) yield out; // (a chunk that only begins a character decodes to nothing)
      }
      const rest = reading.end();
      if (rest) yield rest;
    } finally {
      await chunks.return?.(); // closes the input when the reader stops early
    }
  }
  return { text: Readable.from(passed(), { objectMode: false }), encoding, delimiter };
}
