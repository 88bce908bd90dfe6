// Interactive prompts on the terminal (questions on stderr, so stdout stays clean for
// output); hidden input for passwords. Never used when stdin is not a terminal.
import readline from 'node:readline/promises';
import { DomainError } from '../shared/errors.ts';

export const canPrompt = (): boolean => !!process.stdin.isTTY;

/** A missing value in non-interactive use: say which flag to pass. */
export const missingValue = (flag: string): DomainError =>
  new DomainError('BAD_REQUEST', `Missing --${flag}: pass it as a flag (no terminal to prompt on).`);

export async function ask(question: string): Promise<string> {
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  rl.on('SIGINT', () => {
    rl.close();
    process.kill(process.pid, 'SIGINT'); // the command's own handler: `interrupted: …`, exit 130
  });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

/** Reads a line without echoing it (raw mode; Backspace edits, Ctrl-D cancels, Ctrl-C interrupts). */
export function askHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(question);
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const restore = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const finish = (error?: DomainError) => {
      restore();
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003') {
          restore(); // the terminal back to normal; the answer never comes
          process.kill(process.pid, 'SIGINT'); // raw mode turns Ctrl-C into a character: the command's own handler, exit 130
          return;
        }
        if (ch === '\u0004' && !value) return finish(new DomainError('BAD_REQUEST', 'Cancelled.'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else if (ch >= ' ') value += ch;
      }
    };
    stdin.on('data', onData);
  });
}
