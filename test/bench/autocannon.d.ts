/** The few parts of autocannon's programmatic API the benchmarks use (it ships no types). */
declare module 'autocannon' {
  interface Percentiles {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    [key: string]: number;
  }
  export interface Options {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    pipelining?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    title?: string;
    /** Requests each connection cycles through (path and headers over the defaults). */
    requests?: Array<{ method?: string; path?: string; headers?: Record<string, string> }>;
  }
  export interface Result {
    title?: string;
    url: string;
    connections: number;
    /** Seconds. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Percentiles & { totalCount: number };
    requests: Percentiles & { total: number; sent: number };
    throughput: Percentiles;
  }
  function autocannon(options: Options): Promise<Result> & { stop(): void };
  export default autocannon;
}
