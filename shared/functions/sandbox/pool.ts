// The sandbox workers of a process: `size` worker threads, each running up to `concurrency`
// invocations (their QuickJS instances are separate from the server's heap and event loop: an
// invocation's CPU time is spent off the main thread). Threads start on first use (the cold
// start: the WebAssembly module is compiled then), or all at once with warm(). A thread whose QuickJS instance failed, or
// that overran an invocation's timeout by the grace period (the interrupt handler failed to stop
// it), is terminated and replaced; its invocations end as failed.
import { Worker } from 'node:worker_threads';
import { failedOutcome as failed, type RunOutcome, type RunRequest } from './engine.ts';

/** Where an invocation's SDK requests go. */
export interface ApiTarget {
  /** The platform API's base URL as this process reaches it. */
  url: string;
  /** The Host header (a platform host). */
  host: string;
  /** `/sites/{schema}`: the site's API. */
  prefix: string;
  /** The invoking user's access token; null: anonymous. */
  token: string | null;
}

export interface ToWorker {
  id: number;
  req: RunRequest;
  api: ApiTarget | null;
}

interface Slot {
  worker: Worker;
  ready: Promise<void>;
  running: Map<number, { resolve: (o: RunOutcome) => void; timer: NodeJS.Timeout }>;
  /** Invocations given to it (running, or waiting for the thread to start). */
  load: number;
  retired: boolean;
}

export interface PoolOptions {
  size: number;
  concurrency: number;
  /** How long past an invocation's timeout its thread is terminated (ms). */
  graceMs?: number;
}

export class SandboxPool {
  private readonly slots: Slot[] = [];
  private readonly waiting: (() => void)[] = [];
  private nextId = 1;
  private closed = false;
  private readonly options: Required<PoolOptions>;

  constructor(options: PoolOptions) {
    this.options = { graceMs: 5000, ...options };
  }

  /** Threads running (a retired one leaves `slots` at once). */
  get threads(): number {
    return this.slots.length;
  }

  /** Starts every thread now (a server does at start), so that no invocation pays for a thread's start. */
  async warm(): Promise<void> {
    while (this.threads < this.options.size && !this.closed) this.spawn();
    await Promise.all(this.slots.map((s) => s.ready));
  }

  async run(req: RunRequest, api: ApiTarget | null): Promise<RunOutcome> {
    if (this.closed) return failed('SandboxError', 'The function runtime is shutting down.');
    const slot = await this.acquire();
    try {
      await slot.ready;
      if (slot.retired) return failed('SandboxError', 'The sandbox did not start.');
      const id = this.nextId++;
      return await new Promise<RunOutcome>((resolve) => {
        const timer = setTimeout(() => {
          slot.running.delete(id);
          resolve({ status: 'timed_out', error: { type: 'TimeoutError', message: `The function did not finish within its timeout of ${Math.round(req.limits.timeoutMs / 1000)} s; its sandbox was stopped.` }, logs: [], cpu_ms: 0, duration_ms: req.limits.timeoutMs });
          this.retire(slot);
        }, req.limits.timeoutMs + this.options.graceMs);
        slot.running.set(id, { resolve, timer });
        slot.worker.postMessage({ id, req, api } satisfies ToWorker);
      });
    } finally {
      slot.load--;
      this.release();
    }
  }

  /** A thread with room, started if none has; waits when every thread is full. */
  private async acquire(): Promise<Slot> {
    for (;;) {
      const free = this.slots.filter((s) => s.load < this.options.concurrency).sort((a, b) => a.load - b.load)[0];
      const full = this.slots.length >= this.options.size;
      const slot = free && (free.load === 0 || full) ? free : !full ? this.spawn() : undefined;
      if (slot) {
        slot.load++;
        return slot;
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./worker.ts', import.meta.url));
    worker.unref();
    let onReady!: () => void;
    const slot: Slot = { worker, ready: new Promise((r) => (onReady = r)), running: new Map(), load: 0, retired: false };
    worker.on('message', (msg: { ready?: true; id?: number; outcome?: RunOutcome }) => {
      if (msg.ready) return onReady();
      const job = slot.running.get(msg.id!);
      if (!job) return;
      clearTimeout(job.timer);
      slot.running.delete(msg.id!);
      const { broken, ...outcome } = msg.outcome!;
      job.resolve(outcome);
      if (broken) this.retire(slot);
    });
    const fail = (message: string) => this.retire(slot, failed('SandboxError', message));
    worker.on('error', (err) => fail(`The sandbox failed: ${err.message}`));
    worker.on('exit', () => {
      onReady();
      fail('The sandbox stopped.');
    });
    this.slots.push(slot);
    return slot;
  }

  /** Ends a thread; what still runs on it ends with `outcome`. */
  private retire(slot: Slot, outcome: RunOutcome = failed('SandboxError', 'The sandbox restarted; try again.')): void {
    if (!slot.retired) {
      slot.retired = true;
      const at = this.slots.indexOf(slot);
      if (at >= 0) this.slots.splice(at, 1);
      void slot.worker.terminate();
    }
    for (const [id, job] of slot.running) {
      clearTimeout(job.timer);
      slot.running.delete(id);
      job.resolve(outcome);
    }
    this.release();
  }

  private release(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
    this.slots.length = 0;
    this.release();
  }
}
