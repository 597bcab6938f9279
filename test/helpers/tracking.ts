import { request } from 'node:http';

export interface TrackingResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A GET to the tracking listener at `base` (http://127.0.0.1:port) with the Host header of a tracking link. */
export function trackingGet(base: string, link: string, headers: Record<string, string> = {}, method = 'GET'): Promise<TrackingResponse> {
  const target = new URL(link);
  const listener = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: listener.hostname,
        port: listener.port,
        method,
        path: target.pathname + target.search,
        headers: { host: target.host, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The pixel and tracked links of an HTML part (tracking URLs only). */
export function trackingUrls(html: string): { pixel: string | null; links: string[] } {
  const pixel = /<img src="(https?:\/\/[^"]+\/o\/[^"]+)"/.exec(html)?.[1] ?? null;
  const links = [...html.matchAll(/href="(https?:\/\/[^"]+\/c\/[^"]+)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
  return { pixel, links };
}
