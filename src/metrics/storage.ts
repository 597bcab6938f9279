import { Gauge, type Registry } from 'prom-client';
import { readSpace, type SpaceReading } from '../store/storage-guard.ts';

/** What the storage gauges read of the guard (store/storage-guard.ts). */
export interface StorageView {
  readonly ok: boolean;
  readonly reading: SpaceReading | null;
}

/**
 * The storage gauges: free bytes of the data directory's filesystem (the guard's last reading,
 * no statfs per scrape) and of the keys directory's (read at the scrape), and whether the store
 * takes writes.
 */
export function storageMetrics(registry: Registry, guard: StorageView, keysDir: string): void {
  new Gauge({
    name: 'postilion_storage_free_bytes',
    help: 'Bytes free (for the daemon\'s user) on the filesystem of a directory: dir="data" (data.dir) or "keys" (keys.dir).',
    labelNames: ['dir'] as const,
    registers: [registry],
    async collect() {
      if (guard.reading) this.set({ dir: 'data' }, guard.reading.free);
      const keys = await readSpace(keysDir).catch(() => null);
      if (keys) this.set({ dir: 'keys' }, keys.free);
    },
  });
  new Gauge({
    name: 'postilion_storage_writable',
    help: '1 while the store takes writes; 0 while free space is below storage.min_free_bytes/min_free_percent or after a failed write (new mail refused, no new attempts).',
    registers: [registry],
    collect() {
      this.set(guard.ok ? 1 : 0);
    },
  });
}
