// Secret values never reach an invocation's stored logs, result or error (the ordinary user who
// invoked a function reads them). Every string leaf of every secret in the function's environment
// (a JSON secret's fields too; at least MIN_SECRET_LENGTH characters) is replaced by `***` in
// every form the sandbox can produce without transforming it: as it is, JSON-escaped, in base64
// (standard, unpadded and URL-safe) and URL-encoded (`%20` and `+` for spaces). Matching is plain
// text search (no pattern is built from a secret), linear in the text for each form.
// What cannot be masked: a secret the function transforms otherwise (reversed, split, hashed,
// encoded inside a longer base64 text); docs/functions.md "Secrets in logs and results".

export const MIN_SECRET_LENGTH = 4;
export const MASK = '***';

/** The string leaves of a secret value (numbers as their text). */
function leaves(value: unknown, out: Set<string>): void {
  if (typeof value === 'string') out.add(value);
  else if (typeof value === 'number' || typeof value === 'bigint') out.add(String(value));
  else if (Array.isArray(value)) for (const v of value) leaves(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) leaves(v, out);
}

/** Every form of every leaf that is long enough to mask, the longest first (so no shorter form splits a longer one). */
export function secretForms(values: unknown[]): string[] {
  const raw = new Set<string>();
  for (const v of values) leaves(v, raw);
  const forms = new Set<string>();
  for (const s of raw) {
    if (s.length < MIN_SECRET_LENGTH) continue;
    const base64 = Buffer.from(s, 'utf8').toString('base64');
    const uri = encodeURIComponent(s);
    for (const form of [s, JSON.stringify(s).slice(1, -1), base64, base64.replace(/=+$/, ''), Buffer.from(s, 'utf8').toString('base64url'), uri, uri.replaceAll('%20', '+')]) {
      if (form.length >= MIN_SECRET_LENGTH) forms.add(form);
    }
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** A function masking the forms in a text (the text itself when there is nothing to mask). */
export function masker(forms: string[]): (text: string) => string {
  if (!forms.length) return (text) => text;
  return (text) => {
    let out = text;
    for (const form of forms) if (out.includes(form)) out = out.split(form).join(MASK);
    return out;
  };
}

/** A JSON value with every string (and object key) masked. */
export function maskDeep(value: unknown, mask: (text: string) => string): unknown {
  if (typeof value === 'string') return mask(value);
  if (Array.isArray(value)) return value.map((v) => maskDeep(v, mask));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [mask(k), maskDeep(v, mask)]));
  return value;
}
