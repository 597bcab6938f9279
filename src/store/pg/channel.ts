import pg from 'pg';

export interface ChannelListener {
  /** Resolves once the first LISTEN is in place. */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * LISTENs on one channel over a connection of its own, made again with a back-off when it is
 * lost. `connected` is called each time it listens (again): what was notified meanwhile is lost,
 * and the caller reads what it may have missed; `lost`, when the connection it listened on is.
 */
export function listenChannel(
  config: pg.ClientConfig,
  channel: string,
  heard: (payload: string) => void,
  connected: () => void,
  onError: (err: Error) => void,
  lost: () => void = () => {},
): ChannelListener {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | null = null;
  let delay = 100;
  let firstReady!: () => void;
  const ready = new Promise<void>((resolve) => (firstReady = resolve));
  const connect = async (): Promise<void> => {
    const c = new pg.Client(config);
    c.on('error', (err) => {
      onError(err);
      dropped(c);
    });
    c.on('end', () => dropped(c));
    c.on('notification', (msg) => {
      if (msg.channel === channel && msg.payload !== undefined) heard(msg.payload);
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
    } catch (err) {
      onError(err as Error);
      await c.end().catch(() => undefined);
      schedule();
      return;
    }
    if (closed) {
      await c.end().catch(() => undefined);
      return;
    }
    client = c;
    delay = 100;
    connected();
    firstReady();
  };
  const dropped = (c: pg.Client) => {
    if (client !== c) return;
    client = null;
    lost();
    void c.end().catch(() => undefined);
    schedule();
  };
  const schedule = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = null;
      void connect();
    }, delay);
    delay = Math.min(delay * 2, 5000);
  };
  void connect();
  return {
    ready,
    close: async () => {
      closed = true;
      if (retry) clearTimeout(retry);
      const c = client;
      client = null;
      await c?.end().catch(() => undefined);
    },
  };
}
