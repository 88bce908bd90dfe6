// A sandbox worker thread: one QuickJS WebAssembly instance, several invocations at once
// (they interleave only where a handler awaits the SDK; guest code runs one at a time). The
// SDK's requests leave from here, over HTTP to the platform's own API, as the invoking user.
import http from 'node:http';
import { parentPort } from 'node:worker_threads';
import { failedOutcome, loadQuickJS, runFunction, type ApiCall } from './engine.ts';
import type { ApiTarget, ToWorker } from './pool.ts';

const MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const qjs = await loadQuickJS();
let broken = false;

/** The SDK's requests of one invocation: to `target.url`, under the site's `/sites/{schema}` prefix, with the invoking user's token (none: anonymous). */
function apiCaller(target: ApiTarget | null, deadline: number): ApiCall {
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      if (!target) return reject(new Error('the platform API is not reachable from this process'));
      const url = new URL(`${target.prefix}${path}`, target.url);
      const headers: Record<string, string> = { Host: target.host, Accept: 'application/json' };
      if (target.token) headers.Authorization = `Bearer ${target.token}`;
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const req = http.request(url, { method, headers, timeout: Math.max(1, deadline - Date.now()) }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_RESPONSE_BYTES) return req.destroy(new Error(`the response is larger than ${MAX_RESPONSE_BYTES} bytes`));
          chunks.push(c);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', reject);
      req.end(body);
    });
}

parentPort!.on('message', (msg: ToWorker) => {
  if (broken) {
    parentPort!.postMessage({ id: msg.id, outcome: failedOutcome('SandboxError', 'The sandbox restarted; try again.') });
    return;
  }
  void runFunction(qjs, msg.req, apiCaller(msg.api, Date.now() + msg.req.limits.timeoutMs)).then((outcome) => {
    if (outcome.broken) broken = true;
    parentPort!.postMessage({ id: msg.id, outcome });
  });
});
parentPort!.postMessage({ ready: true });
