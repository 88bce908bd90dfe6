// MIME types as storage uses them: the bucket's `allowed_mime_types` patterns (spec Part 3 §2),
// matching a type against them, the text types an upload may declare, and the document types a
// document library edits. Every check is a linear scan by character class: no regular
// expression is ever built from a pattern someone wrote.

const isAlnum = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
/** Letters, digits, hyphens, plus signs and dots (spec: what a type or subtype may contain). */
const isNameChar = (c: number): boolean => isAlnum(c) || c === 45 /* - */ || c === 43 /* + */ || c === 46; /* . */

/** A type or subtype name of the pattern rules: an alphanumeric first, then name characters. */
function validName(s: string): boolean {
  if (s.length === 0 || s.length > 127 || !isAlnum(s.charCodeAt(0))) return false;
  for (let i = 1; i < s.length; i++) if (!isNameChar(s.charCodeAt(i))) return false;
  return true;
}

// The spec's rule for an `allowed_mime_types` entry: `type/subtype`, `type/*` or `*/*`
// (everything); type and subtype start with an alphanumeric character and may contain letters,
// digits, hyphens, plus signs and dots; the slash is required; a wildcard only as the whole
// subtype (or as both halves of `*/*`). Refused: `image/`, `image`, `*/png`,
// the empty string, `/png`, `image/*pdf`.
export function validMimePattern(p: string): boolean {
  if (typeof p !== 'string') return false;
  const slash = p.indexOf('/');
  if (slash < 0 || p.indexOf('/', slash + 1) >= 0) return false;
  const type = p.slice(0, slash);
  const subtype = p.slice(slash + 1);
  if (type === '*') return subtype === '*';
  return validName(type) && (subtype === '*' || validName(subtype));
}

/** The essence of a media type: `type/subtype`, lowercase, parameters and spaces dropped. */
export function mimeEssence(value: string): string {
  const semi = value.indexOf(';');
  return (semi < 0 ? value : value.slice(0, semi)).trim().toLowerCase();
}

/** A parameter of a media type (`charset`…), lowercase, or undefined. */
export function mimeParameter(value: string, name: string): string | undefined {
  for (const part of value.split(';').slice(1)) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim().toLowerCase() === name) return part.slice(eq + 1).trim().replace(/^"|"$/g, '').toLowerCase();
  }
  return undefined;
}

/** RFC 6838 restricted-name characters, for a declared Content-Type (wider than the pattern rule). */
const isTokenChar = (c: number): boolean => isNameChar(c) || c === 33 || c === 35 || c === 36 || c === 38 || c === 94 || c === 95; // ! # $ & ^ _

/** Whether an essence is a concrete `type/subtype` (no wildcard) a client may declare. */
export function validMimeType(essence: string): boolean {
  const slash = essence.indexOf('/');
  if (slash <= 0 || slash === essence.length - 1 || essence.length > 255 || essence.indexOf('/', slash + 1) >= 0) return false;
  for (let i = 0; i < essence.length; i++) {
    if (i === slash) continue;
    const c = essence.charCodeAt(i);
    if (!isTokenChar(c)) return false;
  }
  return isAlnum(essence.charCodeAt(0)) && isAlnum(essence.charCodeAt(slash + 1));
}

// Whether `type` matches one of `patterns` (`type/subtype`, `type/*`, `*/*`),
// compared as lowercase strings (parameters of `type` ignored). An empty list allows everything
// (spec: empty means all allowed).
export function mimeMatches(type: string, patterns: string[]): boolean {
  if (patterns.length === 0) return true;
  const essence = mimeEssence(type);
  const slash = essence.indexOf('/');
  const major = slash < 0 ? essence : essence.slice(0, slash);
  for (const raw of patterns) {
    const p = raw.trim().toLowerCase();
    if (p === '*/*' || p === essence) return true;
    if (p.endsWith('/*') && p.slice(0, -2) === major) return true;
  }
  return false;
}

const TEXT_APPLICATION_TYPES = new Set([
  'application/json', 'application/xml', 'application/javascript', 'application/ecmascript', 'application/x-ndjson',
  'application/x-javascript', 'application/yaml', 'application/x-yaml', 'application/toml', 'application/sql',
  'application/graphql', 'application/x-sh', 'application/x-httpd-php', 'application/csv', 'application/rtf',
  'application/x-tex', 'application/x-latex', 'application/x-www-form-urlencoded', 'application/x-subrip',
  'image/svg+xml',
]);

/** Types whose bytes are text: `text/*`, the `+json`/`+xml` families and a few application types. */
export function isTextType(essence: string): boolean {
  return essence.startsWith('text/') || essence.endsWith('+json') || essence.endsWith('+xml') || TEXT_APPLICATION_TYPES.has(essence);
}

const TEXT_EXTENSIONS: Record<string, string> = {
  txt: 'text/plain', text: 'text/plain', log: 'text/plain', ini: 'text/plain', conf: 'text/plain', cfg: 'text/plain',
  csv: 'text/csv', tsv: 'text/tab-separated-values', md: 'text/markdown', markdown: 'text/markdown',
  html: 'text/html', htm: 'text/html', css: 'text/css', js: 'text/javascript', mjs: 'text/javascript', cjs: 'text/javascript',
  json: 'application/json', ndjson: 'application/x-ndjson', jsonl: 'application/x-ndjson', geojson: 'application/geo+json',
  xml: 'application/xml', svg: 'image/svg+xml', xhtml: 'application/xhtml+xml', rss: 'application/rss+xml', atom: 'application/atom+xml',
  yaml: 'application/yaml', yml: 'application/yaml', toml: 'application/toml', sql: 'application/sql', graphql: 'application/graphql',
  sh: 'application/x-sh', ics: 'text/calendar', vcf: 'text/vcard', vtt: 'text/vtt', srt: 'application/x-subrip', rtf: 'application/rtf',
  tex: 'application/x-tex', py: 'text/x-python', rb: 'text/x-ruby', java: 'text/x-java', c: 'text/x-c', h: 'text/x-c',
  cpp: 'text/x-c++', go: 'text/x-go', rs: 'text/x-rust', php: 'application/x-httpd-php',
};

/** The text type of a file name's extension (`report.CSV` → `text/csv`), or undefined. */
export function textTypeOfFilename(filename: string): string | undefined {
  const base = filename.slice(filename.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const ext = base.slice(dot + 1).toLowerCase();
  return Object.hasOwn(TEXT_EXTENSIONS, ext) ? TEXT_EXTENSIONS[ext] : undefined;
}

const EDITABLE = new Set([
  // Word processing
  'application/msword',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.template',
  'application/vnd.ms-word.document.macroenabled.12',
  'application/vnd.ms-word.template.macroenabled.12',
  'application/vnd.oasis.opendocument.text',
  'application/vnd.oasis.opendocument.text-template',
  // Spreadsheets
  'application/vnd.ms-excel',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.template',
  'application/vnd.ms-excel.sheet.macroenabled.12',
  'application/vnd.ms-excel.template.macroenabled.12',
  'application/vnd.ms-excel.sheet.binary.macroenabled.12',
  'application/vnd.oasis.opendocument.spreadsheet',
  'application/vnd.oasis.opendocument.spreadsheet-template',
  // Presentations
  'application/vnd.ms-powerpoint',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  'application/vnd.openxmlformats-officedocument.presentationml.template',
  'application/vnd.openxmlformats-officedocument.presentationml.slideshow',
  'application/vnd.ms-powerpoint.presentation.macroenabled.12',
  'application/vnd.ms-powerpoint.template.macroenabled.12',
  'application/vnd.ms-powerpoint.slideshow.macroenabled.12',
  'application/vnd.oasis.opendocument.presentation',
  'application/vnd.oasis.opendocument.presentation-template',
]);

/** Word-processing, spreadsheet and presentation types (OOXML, ODF, legacy binary Office). */
export function isDocumentEditable(mimetype: string | null | undefined): boolean {
  return typeof mimetype === 'string' && EDITABLE.has(mimeEssence(mimetype));
}
