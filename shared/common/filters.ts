// Small helpers for list filters shared by every resource.

/** `true`/`1` → true, `false`/`0` → false, `all`/`*` → undefined (no filter); absent → the default. */
export function boolFilter(value: string | undefined, def: boolean | undefined): boolean | undefined {
  if (value === undefined || value === '') return def;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return undefined;
}

/** Escapes LIKE/ILIKE wildcards so user text matches literally. */
export const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);
