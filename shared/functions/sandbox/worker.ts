// A sandbox worker thread: several invocations at once (they interleave only where a handler
// awaits the SDK; guest code runs one at a time), each in a QuickJS WebAssembly instance of its
// own — an "engine" — whose memory is a WebAssembly.Memory with a maximum. That maximum is the
// memory limit that holds: QuickJS's own allocation limit cannot count sizes in this build
// (malloc_usable_size is unavailable to it), so a guest filling strings grew the shared instance to
// 2 GiB. Now an allocation past the maximum fails inside the instance (QuickJS: out of memory), no
// other invocation shares the instance, and an instance that grew (or failed to free a runtime) is
// dropped for a fresh one (≈ 1 ms: the module is compiled once per thread). The SDK's requests
// leave from here, over HTTP to the platform's own API, as the invoking user.
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSSyncVariant, type QuickJSWASMModule } from 'quickjs-emscripten-core';
import { runFunction, SdkRefusal, type ApiCall } from './engine.ts';
import type { ApiTarget, ToWorker } from './pool.ts';
import { sdkUrl } from './sdk-url.ts';

// WebAssembly's types come with TypeScript's DOM library, which this project does not load.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
declare const WebAssembly: {
  Memory: new (descriptor: { initial: number; maximum: number }) => WasmMemory;
  compile(bytes: Uint8Array): Promise<unknown>;
};

const MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const PAGE = 65536;
/** An instance's own memory before any guest allocation (QuickJS's static data and stack). */
const BASE_PAGES = 256;

interface Engine {
  qjs: QuickJSWASMModule;
  memory: WasmMemory;
  /** The guest memory it was made for (bytes). */
  limit: number;
}

/**
 * Guest code runs at a lower CPU priority than the server's own threads (Linux: nice 10 for this
 * thread, by its thread id), so a function spinning its CPU limit away never slows the event loop,
 * PostgreSQL or the HTTP answers of other sites: the scheduler gives the sandbox what they leave.
 * Threads inherit the priority of the thread that creates them, and libuv's pool (fs, DNS,
 * crypto, argon2: the whole process's) starts in whichever thread first queues work: it is made
 * to start before the priority drops (an asynchronous read below), so it never starts niced here.
 */
function lowerPriority(): void {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').at(-1));
    if (Number.isInteger(tid)) os.setPriority(tid, 10);
  } catch {
    // Not Linux, or not allowed: the thread keeps the process's priority.
  }
}
/** How many sites the pool serves now (pool.ts `busy`): guest code yields while it is more than one. */
const busy = (workerData as { busy: Int32Array }).busy;
const othersServed = () => Atomics.load(busy, 0) > 1;
const wasmBytes = await fs.promises.readFile(createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync/wasm'));
lowerPriority();
const wasmModule = await WebAssembly.compile(wasmBytes);
const idle: Engine[] = [];

async function engineFor(limit: number): Promise<Engine> {
  const found = idle.findIndex((e) => e.limit === limit);
  if (found >= 0) return idle.splice(found, 1)[0]!;
  const memory = new WebAssembly.Memory({ initial: BASE_PAGES, maximum: BASE_PAGES + Math.ceil(limit / PAGE) });
  const qjs = await newQuickJSWASMModuleFromVariant(newVariant(variant as unknown as QuickJSSyncVariant, { wasmModule, wasmMemory: memory }));
  return { qjs, memory, limit };
}

/** Instances that grew past twice their initial size kept for reuse (the others go, their memory back to the system). */
const KEEP_GROWN = 2;
const grown = (e: Engine) => e.memory.buffer.byteLength > BASE_PAGES * PAGE * 2;

/**
 * Back to the idle list unless broken. A few grown instances are kept too, so that a function
 * that fills its memory on every invocation does not make the thread map, fault in and unmap tens
 * of megabytes each time; a thread keeps KEEP_GROWN of them at most (their memory stays mapped).
 */
function release(engine: Engine, broken: boolean): void {
  if (broken) return;
  if (grown(engine) && idle.filter(grown).length >= KEEP_GROWN) return;
  idle.push(engine);
}

/** The SDK's requests of one invocation: to `target.url`, under the site's `/sites/{schema}` prefix, with the invoking user's token (none: anonymous). */
function apiCaller(target: ApiTarget | null, deadline: number): ApiCall {
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      if (!target) return reject(new Error('the platform API is not reachable from this process'));
      const url = sdkUrl(target, path);
      if (typeof url === 'string') return reject(new SdkRefusal(url));
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
  void (async () => {
    const engine = await engineFor(msg.req.limits.memoryBytes);
    const outcome = await runFunction(engine.qjs, msg.req, apiCaller(msg.api, Date.now() + msg.req.limits.timeoutMs), othersServed);
    release(engine, outcome.broken === true);
    delete outcome.broken;
    parentPort!.postMessage({ id: msg.id, outcome });
  })();
});
parentPort!.postMessage({ ready: true });
