// How the server's V8 heap is set up for streaming (docs/storage.md "Throughput"). A module of
// its own so the benchmarks can start servers with the same flags without loading the server.
import v8 from 'node:v8';

/**
 * The Node flags the server runs with (`npm start`, the benchmarks' servers): the old generation's
 * first collection only at 200 MB, and a young generation of up to 64 MB per semi-space (the
 * objects of a large JSON body die young instead of being copied by scavenges while alive). docs/storage.md "Throughput": without it, the stream of
 * short-lived 64 KiB buffers of an upload or a download makes V8 run a full mark-compact of the
 * ≈ 50 MB heap every few dozen MB moved. V8 reads it when the heap is made: a command-line flag
 * (NODE_OPTIONS refuses it).
 */
export const SERVER_NODE_FLAGS = ['--initial-old-space-size=200', '--max-semi-space-size=64'];

/**
 * The other half, settable at run time: external memory (those buffers) counted in the heap's
 * global limit, not against V8's fixed 64 MB step that starts a full collection whatever the
 * heap's size. Read at each limit computation, so setting it before any traffic takes effect.
 */
export function tuneHeap(): void {
  v8.setFlagsFromString('--external-memory-accounted-in-global-limit');
}
