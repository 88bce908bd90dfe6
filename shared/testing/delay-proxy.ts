// A TCP proxy in front of PostgreSQL for tests that holds back the notifications the server
// sends (NotificationResponse messages, in order): each reaches the client `delayMs` later, or
// not at all while held (`hold()` until `release()`); every other message passes at once. A
// process connected through it hears of changes late, as if its listening connection lagged.
import net from 'node:net';

export interface DelayProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url: (url: string) => string;
  hold: () => void;
  release: () => void;
  close: () => Promise<void>;
}

export async function startDelayProxy(target: { host: string; port: number }, delayMs: number): Promise<DelayProxy> {
  const sockets = new Set<net.Socket>();
  let held: (() => void)[] | undefined;
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s)).on('error', () => (client.destroy(), upstream.destroy()));
    }
    client.pipe(upstream);
    upstream.on('end', () => client.end());
    // Backend messages: a type byte, then an int32 length that counts itself and the body.
    let buffered = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 5 && buffered.length >= 1 + buffered.readInt32BE(1)) {
        const message = buffered.subarray(0, 1 + buffered.readInt32BE(1));
        buffered = buffered.subarray(message.length);
        if (message[0] !== 0x41 /* 'A' */) {
          client.write(message);
          continue;
        }
        const deliver = () => setTimeout(() => client.write(message), delayMs);
        if (held) held.push(deliver);
        else deliver();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: (u) => {
      const parsed = new URL(u);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    hold: () => void (held ??= []),
    release: () => {
      const pending = held ?? [];
      held = undefined;
      for (const deliver of pending) deliver();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
