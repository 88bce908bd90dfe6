// Server processes for black-box tests: `platform serve` (or `npm start`) as a real child
// process, in a process group of its own so that a test can always clean up after itself.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Served {
  child: ChildProcess;
  url: string;
  output: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/**
 * Starts a server process (`command args`) in a process group of its own and waits for its
 * "platform listening" log line. `killGroup(s.child)` kills that group (whatever the test left running).
 */
export async function serve(command: string, args: string[], e: Record<string, string>): Promise<Served> {
  const child = spawn(command, args, { cwd: ROOT, env: e, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`serve did not start:\n${stdout}\n${stderr}`));
    }, 60_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const m = /"url":"(http:[^"]+)"[^\n]*"platform listening"/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', () => reject(new Error(`serve exited:\n${stdout}\n${stderr}`)));
  });
  return { child, url, output: () => ({ stdout, stderr }), exited };
}

/** Kills the process group the test started (by its leader's PID), if anything of it is left. */
export function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    /* already gone */
  }
}
