// Stored connections of `platform login`, in `<config dir>/credentials.json` (directory 0700,
// file 0600, written atomically). Tokens are never printed.
//
// A **profile** (`--profile`, `PLATFORM_PROFILE`, else `default`) is one remembered connection:
// the API URL of its last `platform login --api-url`, and its logins, one per API URL — the
// platform's, and each site's (`platform login --site <schema>`, or a site token exchanged for
// the platform login) under `<api-url>/sites/<schema>`. `platform logout` clears the profile.
//
//   {"version": 2, "profiles": {"default": {"api_url": "https://…", "apis": {"https://…": {access, refresh, username}}}}}
//
// A version 1 file (`{"version": 1, "apis": {…}}`, before profiles) is read as the default profile.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DomainError } from '../shared/errors.ts';

export interface Credentials {
  access: string;
  refresh: string;
  username: string;
}

interface Profile {
  api_url?: string;
  apis: Record<string, Credentials>;
}

interface CredentialsFile {
  version: 2;
  profiles: Record<string, Profile>;
}

export const DEFAULT_PROFILE = 'default';
const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** PLATFORM_CONFIG_DIR, else $XDG_CONFIG_HOME/platform, else ~/.config/platform. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PLATFORM_CONFIG_DIR) return path.resolve(env.PLATFORM_CONFIG_DIR);
  if (env.XDG_CONFIG_HOME) return path.join(path.resolve(env.XDG_CONFIG_HOME), 'platform');
  return path.join(os.homedir(), '.config', 'platform');
}

/** The key an API URL is stored under: scheme, host, port and path prefix, no trailing slash. */
export function apiKey(apiUrl: string): string {
  const url = new URL(apiUrl);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** The platform login's URL of a version 1 file, when it holds exactly one. */
function soleApiUrl(apis: Record<string, Credentials>): string | undefined {
  const platform = Object.keys(apis).filter((key) => !key.includes('/sites/'));
  return platform.length === 1 ? platform[0] : undefined;
}

/** One profile of the credentials file: its remembered API URL and its logins. */
export class CredentialStore {
  readonly dir: string;
  readonly file: string;
  readonly profile: string;

  constructor(profile: string = DEFAULT_PROFILE, dir: string = configDir()) {
    if (!PROFILE_NAME.test(profile)) throw new DomainError('BAD_REQUEST', `Invalid profile ${JSON.stringify(profile)}: letters, digits, ".", "_" and "-", at most 64.`);
    this.profile = profile;
    this.dir = dir;
    this.file = path.join(dir, 'credentials.json');
  }

  private read(): CredentialsFile {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 2, profiles: {} };
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!isObject(parsed)) throw new Error(`${this.file} is not valid JSON: fix or delete it, then run \`platform login\` again.`);
    if (parsed.version === 1 || !('profiles' in parsed)) {
      const apis = (isObject(parsed.apis) ? parsed.apis : {}) as Record<string, Credentials>;
      return { version: 2, profiles: Object.keys(apis).length ? { [DEFAULT_PROFILE]: { api_url: soleApiUrl(apis), apis } } : {} };
    }
    const profiles: Record<string, Profile> = {};
    for (const [name, p] of Object.entries(isObject(parsed.profiles) ? parsed.profiles : {})) {
      if (!isObject(p)) continue;
      profiles[name] = { api_url: typeof p.api_url === 'string' ? p.api_url : undefined, apis: (isObject(p.apis) ? p.apis : {}) as Record<string, Credentials> };
    }
    return { version: 2, profiles };
  }

  private write(data: CredentialsFile): void {
    if (!Object.keys(data.profiles).length) {
      fs.rmSync(this.file, { force: true }); // nothing remembered: no file
      return;
    }
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
    fs.chmodSync(tmp, 0o600); // the umask cannot widen it, but an old file of that name could be wider
    fs.renameSync(tmp, this.file);
  }

  /** Changes this profile (created on first use, removed once it holds nothing). */
  private update(change: (profile: Profile) => void): void {
    const data = this.read();
    const profile = data.profiles[this.profile] ?? { apis: {} };
    change(profile);
    if (profile.api_url === undefined && !Object.keys(profile.apis).length) delete data.profiles[this.profile];
    else data.profiles[this.profile] = profile;
    this.write(data);
  }

  /** The API URL the profile remembers (its last `platform login --api-url`). */
  apiUrl(): string | undefined {
    return this.read().profiles[this.profile]?.api_url;
  }

  get(apiUrl: string): Credentials | undefined {
    return this.read().profiles[this.profile]?.apis[apiKey(apiUrl)];
  }

  /** Stores a login; `remember`: the platform login of `platform login`, whose URL the profile keeps. */
  set(apiUrl: string, credentials: Credentials, remember?: string): void {
    this.update((p) => {
      p.apis[apiKey(apiUrl)] = credentials;
      if (remember !== undefined) p.api_url = remember;
    });
  }

  /** Removes one login (the file read and written once); false when there was none. */
  delete(apiUrl: string): boolean {
    const key = apiKey(apiUrl);
    let found = false;
    this.update((p) => {
      found = Object.hasOwn(p.apis, key);
      delete p.apis[key];
    });
    return found;
  }

  /** The logins of an API: its platform login and those of its sites, by URL. */
  loginsOf(apiUrl: string): [string, Credentials][] {
    const key = apiKey(apiUrl);
    return Object.entries(this.read().profiles[this.profile]?.apis ?? {}).filter(([url]) => url === key || url.startsWith(`${key}/sites/`));
  }

  /** Forgets the remembered API URL when it is this one. */
  forgetApiUrl(apiUrl: string): void {
    const key = apiKey(apiUrl);
    this.update((p) => {
      if (p.api_url !== undefined && apiKey(p.api_url) === key) delete p.api_url;
    });
  }
}
