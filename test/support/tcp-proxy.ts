/**
 * A small TCP proxy, controllable at run time, to put faults between one client (an ioredis
 * client, a pg pool) and its server:
 *
 *   const proxy = await startTcpProxy({ targetPort: 6379 });
 *   new Redis(`redis://127.0.0.1:${proxy.port}`);
 *   proxy.stall(2_000);  // no byte moves either way for 2 s; sockets stay open, bytes are held
 *   proxy.drop();        // every current connection is reset (RST), both sides
 *   proxy.blackhole();   // bytes are read and thrown away, new connections go nowhere
 *   proxy.refuse(3_000); // new connections are reset at once for 3 s (with drop(): a link down)
 *   proxy.resume();      // back to normal
 *   await proxy.close();
 *
 * - `stall(ms?)`: stops reading from both sides of every connection (current and new ones), so
 *   nothing is forwarded and nothing is lost: TCP flow control holds the bytes in the kernel,
 *   and they are delivered in order on `resume()` (like a network that stops and heals). New
 *   connections are accepted but not connected upstream until the stall ends. With `ms`, it
 *   ends by itself after `ms`.
 * - `blackhole(ms?)`: like packets dropped on the floor: bytes sent either way are read and
 *   discarded, new connections are accepted and never forwarded. A connection that lost bytes
 *   this way has a broken byte stream, so when the blackhole ends it is reset (RST); the client
 *   sees its requests time out, then the connection die, and reconnects. Connections that sent
 *   nothing during the blackhole carry on.
 * - `drop()`: resets every current connection at once (RST on both sides where the platform
 *   allows, `socket.resetAndDestroy()`); new connections are accepted normally afterwards.
 * - `refuse(ms?)`: every new connection is reset as soon as it is accepted (the client sees
 *   ECONNRESET, much like a refused connection); current connections are left alone. Call
 *   `drop()` then `refuse(ms)` for a link that goes down for `ms`.
 * - `resume()`: ends a stall, a blackhole or a refusal now (cancels its timer).
 * - `close()`: stops listening and destroys every connection.
 *
 * When the target refuses a connection (the server is down), the client's socket is reset too,
 * so the client sees the same thing as a refused connection, one step later.
 */
import net from 'node:net';

export interface TcpProxyOptions {
  /** Port of the server to forward to. */
  targetPort: number;
  /** @default '127.0.0.1' */
  targetHost?: string;
  /** Port to listen on; 0 or omitted picks a free port. Listens on 127.0.0.1. */
  listenPort?: number;
  /** @default '127.0.0.1' */
  listenHost?: string;
}

export type TcpProxyMode = 'forward' | 'stall' | 'blackhole' | 'refuse';

export interface TcpProxyStats {
  /** Connections accepted since the start. */
  accepted: number;
  /** Connections open now. */
  open: number;
  /** Connections reset by drop() or at the end of a blackhole. */
  reset: number;
  /** Bytes forwarded client → server and server → client. */
  bytesUp: number;
  bytesDown: number;
  /** Bytes thrown away by a blackhole. */
  bytesDiscarded: number;
}

export interface TcpProxy {
  /** The port the proxy listens on (connect clients here). */
  readonly port: number;
  readonly targetPort: number;
  readonly mode: TcpProxyMode;
  readonly stats: TcpProxyStats;
  /** Stop forwarding both ways, holding the bytes; ends after `ms` when given. */
  stall(ms?: number): void;
  /** Resume forwarding (ends a stall or a blackhole). */
  resume(): void;
  /** Reset every current connection abruptly. Returns how many were reset. */
  drop(): number;
  /** Accept but forward nothing, discarding bytes; ends after `ms` when given. */
  blackhole(ms?: number): void;
  /** Reset every new connection at once; ends after `ms` when given. */
  refuse(ms?: number): void;
  /** Point new connections at another port (current ones are left alone). */
  retarget(targetPort: number, targetHost?: string): void;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket | undefined;
  /** Upstream connection not yet made (accepted during a stall or blackhole). */
  pendingConnect: boolean;
  /** Bytes were discarded by a blackhole: the stream is broken, reset it when the blackhole ends. */
  corrupted: boolean;
  /** Waiting for 'drain' on the socket the data goes to. */
  clientBlocked: boolean;
  upstreamBlocked: boolean;
  closed: boolean;
}

/** RST where supported (Node ≥ 18.3), a plain destroy otherwise. */
function reset(socket: net.Socket | undefined): void {
  if (!socket || socket.destroyed) return;
  try {
    if (typeof socket.resetAndDestroy === 'function' && socket.readyState !== 'opening') socket.resetAndDestroy();
    else socket.destroy();
  } catch {
    socket.destroy();
  }
}

export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  let targetPort = options.targetPort;
  let targetHost = options.targetHost ?? '127.0.0.1';
  let mode: TcpProxyMode = 'forward';
  let modeTimer: NodeJS.Timeout | undefined;
  const pairs = new Set<Pair>();
  const stats: TcpProxyStats = { accepted: 0, open: 0, reset: 0, bytesUp: 0, bytesDown: 0, bytesDiscarded: 0 };

  const closePair = (pair: Pair, abrupt: boolean): void => {
    if (pair.closed) return;
    pair.closed = true;
    pairs.delete(pair);
    stats.open = pairs.size;
    if (abrupt) {
      reset(pair.client);
      reset(pair.upstream);
    } else {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
  };

  /** Reads from each side only when forwarding and the other side is not backed up. */
  const updateFlow = (pair: Pair): void => {
    if (pair.closed) return;
    const { client, upstream } = pair;
    if (mode === 'stall') {
      client.pause();
      upstream?.pause();
      return;
    }
    if (mode === 'blackhole') {
      // Read and discard (see onData).
      client.resume();
      upstream?.resume();
      return;
    }
    if (pair.pendingConnect) {
      client.pause();
      return;
    }
    if (pair.upstreamBlocked) client.pause();
    else client.resume();
    if (upstream) {
      if (pair.clientBlocked) upstream.pause();
      else upstream.resume();
    }
  };

  const connectUpstream = (pair: Pair): void => {
    pair.pendingConnect = false;
    const upstream = net.connect({ port: targetPort, host: targetHost });
    upstream.setNoDelay(true);
    pair.upstream = upstream;
    upstream.on('data', (chunk: Buffer) => {
      if (pair.closed) return;
      if (mode === 'blackhole') {
        stats.bytesDiscarded += chunk.length;
        pair.corrupted = true;
        return;
      }
      stats.bytesDown += chunk.length;
      if (!pair.client.write(chunk)) {
        pair.clientBlocked = true;
        updateFlow(pair);
      }
    });
    upstream.on('drain', () => {
      pair.upstreamBlocked = false;
      updateFlow(pair);
    });
    // A refused or failed upstream connection: reset the client, as a refused connect would.
    upstream.on('error', () => closePair(pair, true));
    upstream.on('end', () => {
      if (!pair.closed) pair.client.end();
    });
    // The server closed: finish sending what it said to the client, then close that side too
    // (the client's 'close' ends the pair).
    upstream.on('close', () => {
      if (!pair.closed) pair.client.end();
    });
    updateFlow(pair);
  };

  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (client) => {
    stats.accepted++;
    if (mode === 'refuse') {
      client.on('error', () => undefined);
      stats.reset++;
      reset(client);
      return;
    }
    client.setNoDelay(true);
    const pair: Pair = {
      client,
      upstream: undefined,
      pendingConnect: true,
      corrupted: false,
      clientBlocked: false,
      upstreamBlocked: false,
      closed: false,
    };
    pairs.add(pair);
    stats.open = pairs.size;
    client.on('data', (chunk: Buffer) => {
      if (pair.closed) return;
      if (mode === 'blackhole' || !pair.upstream) {
        // Only reachable in a blackhole (otherwise the client is paused until connected).
        stats.bytesDiscarded += chunk.length;
        pair.corrupted = true;
        return;
      }
      stats.bytesUp += chunk.length;
      if (!pair.upstream.write(chunk)) {
        pair.upstreamBlocked = true;
        updateFlow(pair);
      }
    });
    client.on('drain', () => {
      pair.clientBlocked = false;
      updateFlow(pair);
    });
    client.on('error', () => closePair(pair, true));
    client.on('end', () => {
      if (!pair.closed) {
        if (pair.upstream) pair.upstream.end();
        else closePair(pair, false);
      }
    });
    client.on('close', () => closePair(pair, false));
    if (mode === 'forward') connectUpstream(pair);
    else updateFlow(pair);
  });
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, options.listenHost ?? '127.0.0.1', () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcp proxy: no listening port');

  const setMode = (next: TcpProxyMode, ms: number | undefined): void => {
    clearTimeout(modeTimer);
    modeTimer = undefined;
    const previous = mode;
    mode = next;
    if (previous === 'blackhole' && next !== 'blackhole') {
      for (const pair of [...pairs]) {
        if (pair.corrupted) {
          stats.reset++;
          closePair(pair, true);
        }
      }
    }
    for (const pair of [...pairs]) {
      if (next === 'forward' && pair.pendingConnect) connectUpstream(pair);
      else if (next === 'refuse' && pair.pendingConnect) {
        // Accepted during a stall or blackhole and never connected: refused now.
        stats.reset++;
        closePair(pair, true);
      } else updateFlow(pair);
    }
    if (next !== 'forward' && ms !== undefined && ms >= 0) {
      modeTimer = setTimeout(() => setMode('forward', undefined), ms);
      modeTimer.unref?.();
    }
  };

  let closed = false;
  return {
    port: address.port,
    get targetPort() {
      return targetPort;
    },
    get mode() {
      return mode;
    },
    stats,
    stall: (ms?: number) => setMode('stall', ms),
    blackhole: (ms?: number) => setMode('blackhole', ms),
    refuse: (ms?: number) => setMode('refuse', ms),
    resume: () => setMode('forward', undefined),
    drop() {
      const all = [...pairs];
      for (const pair of all) closePair(pair, true);
      stats.reset += all.length;
      return all.length;
    },
    retarget(port: number, host?: string) {
      targetPort = port;
      if (host) targetHost = host;
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(modeTimer);
      for (const pair of [...pairs]) closePair(pair, true);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
