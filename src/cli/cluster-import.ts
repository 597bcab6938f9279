import { Command } from 'commander';
import type { ImportSummary } from '../cluster/import.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './io.ts';

/** `postilion cluster import`: a single node's accounts, keys and domains into an empty cluster database. */
export function clusterImportCommand(program: Command, io: CliIo): Command {
  return new Command('import')
    .description(
      "copy this node's accounts, API keys, domains (with their DKIM keys), SMTP credentials, webhooks, routes, suppressions and secrets " +
        'into an empty cluster database, the daemon stopped: the way from one node to several. Its mail stays in its data directory, delivered by it in cluster mode',
    )
    .option('--json', 'print what was copied as JSON')
    .action(async (opts: { json?: boolean }) => {
      const config = configFrom(program);
      const { importControlPlane } = await import('../cluster/import.ts');
      const summary = await importControlPlane(config);
      io.out(opts.json ? `${JSON.stringify(summary, null, 2)}\n` : formatImport(summary));
    });
}

function formatImport(s: ImportSummary): string {
  const families = Object.entries(s.records)
    .map(([family, n]) => `${family} ${n}`)
    .join(', ');
  return (
    `imported the store in ${s.data_dir} into the cluster database\n` +
    `records: ${s.total}${families ? ` (${families})` : ''}\n` +
    `secrets: ${s.secrets.length === 0 ? 'none found (the cluster keeps its own)' : s.secrets.join(', ')}\n` +
    `DKIM private keys: ${s.dkim_keys}\n` +
    `cluster key: ${s.key_file}${s.key_made ? ' (made now: copy it to every node)' : ''}\n` +
    'start this node and the others with the same cluster settings: they share what was imported\n'
  );
}
