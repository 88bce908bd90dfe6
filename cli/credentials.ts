// Stored logins of `platform login`: one entry per API URL in `<config dir>/credentials.json`
// (directory 0700, file 0600, written atomically). Tokens are never printed. A site login
// (`platform login --site <schema>`) is one more entry, under `<api-url>/sites/<schema>`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface Credentials {
  access: string;
  refresh: string;
  username: string;
}

interface CredentialsFile {
  version: 1;
  apis: Record<string, Credentials>;
}

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

export class CredentialStore {
  readonly dir: string;
  readonly file: string;

  constructor(dir: string = configDir()) {
    this.dir = dir;
    this.file = path.join(dir, 'credentials.json');
  }

  private read(): CredentialsFile {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, apis: {} };
      throw err;
    }
    try {
      const parsed = JSON.parse(text) as Partial<CredentialsFile>;
      return { version: 1, apis: parsed.apis && typeof parsed.apis === 'object' ? parsed.apis : {} };
    } catch {
      throw new Error(`${this.file} is not valid JSON: fix or delete it, then run \`platform login\` again.`);
    }
  }

  private write(data: CredentialsFile): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
    fs.chmodSync(tmp, 0o600); // the umask cannot widen it, but an old file of that name could be wider
    fs.renameSync(tmp, this.file);
  }

  get(apiUrl: string): Credentials | undefined {
    return this.read().apis[apiKey(apiUrl)];
  }

  set(apiUrl: string, credentials: Credentials): void {
    const data = this.read();
    data.apis[apiKey(apiUrl)] = credentials;
    this.write(data);
  }

  /** Removes the entry; false when there was none. */
  delete(apiUrl: string): boolean {
    const data = this.read();
    const key = apiKey(apiUrl);
    if (!(key in data.apis)) return false;
    delete data.apis[key];
    this.write(data);
    return true;
  }
}
