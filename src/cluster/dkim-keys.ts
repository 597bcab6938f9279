import type pg from 'pg';
import type { DkimKeyFiles } from '../domains/dkim-keys.ts';
import { reaching } from '../store/pg/shared-store-error.ts';
import type { SecretBox } from '../util/secret-box.ts';

/**
 * DKIM private keys in the cluster's database, sealed with the cluster key: every node signs with
 * them. The database out of reach is a SharedStoreError (503, 451 4.3.0).
 */
export class ClusterDkimKeys implements DkimKeyFiles {
  constructor(
    private readonly pool: pg.Pool,
    private readonly key: SecretBox,
  ) {}

  async read(domainId: string, selector: string): Promise<string> {
    const { rows } = await reaching(() =>
      this.pool.query<{ sealed: string }>('SELECT sealed FROM dkim_keys WHERE domain_id = $1 AND selector = $2', [domainId, selector]),
    );
    if (rows[0] === undefined) throw Object.assign(new Error(`no DKIM key ${selector} for domain ${domainId}`), { code: 'ENOENT' });
    return this.key.open(rows[0].sealed);
  }

  async write(domainId: string, selector: string, pem: string): Promise<void> {
    await reaching(() =>
      this.pool.query(
        'INSERT INTO dkim_keys (domain_id, selector, sealed) VALUES ($1, $2, $3) ON CONFLICT (domain_id, selector) DO UPDATE SET sealed = EXCLUDED.sealed',
        [domainId, selector, this.key.seal(pem)],
      ),
    );
  }

  async remove(domainId: string, selector: string): Promise<void> {
    await reaching(() => this.pool.query('DELETE FROM dkim_keys WHERE domain_id = $1 AND selector = $2', [domainId, selector]));
  }

  async removeDomain(domainId: string): Promise<void> {
    await reaching(() => this.pool.query('DELETE FROM dkim_keys WHERE domain_id = $1', [domainId]));
  }
}
