import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import type { Identity } from '../domains/records.ts';
import { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import { Store, StoreLockedError } from '../store/store.ts';
import { checkCertificates } from './certificates.ts';
import { fail, ok, warn, type Check } from './check.ts';
import { checkActiveDkim } from './dkim.ts';
import { checkDomainRecords } from './dns-records.ts';
import { checkListeners, type DaemonState } from './listeners.ts';
import { createLookups, type Lookups } from './lookups.ts';
import { checkSendingIps } from './reverse-dns.ts';
import { checkStorage } from './storage.ts';

/** Domains checked at once. */
const PARALLEL_DOMAINS = 8;
/** How long the control socket may take to answer before the daemon counts as not answering. */
const DAEMON_ANSWER_MS = 5000;

export interface DoctorInput {
  config: Config;
  /** The file the configuration was read from, or null for the built-in defaults. */
  source: string | null;
  /** What the domains' records must name (the daemon's identityOf(config)). */
  identity: Identity;
  now: number;
}

/** The first check: the configuration loaded and validated. */
export function configLoaded(source: string | null): Check {
  return ok('config', source === null ? 'no configuration file: the built-in defaults (and POSTILION_* variables) are valid' : `${source} loads and is valid`);
}

export function configFailed(message: string): Check {
  return fail('config', message);
}

/**
 * Everything `postilion doctor` checks, in order: the configuration, the daemon, the listeners,
 * the certificates, the reverse DNS of the sending addresses, then each domain's DNS records and
 * active DKIM keys. Reads only: no record, key or certificate is written (opening the store lets
 * LevelDB tidy its own files, as any open does).
 */
export async function runDoctor(input: DoctorInput): Promise<Check[]> {
  const { config } = input;
  const lookups = createLookups(config);
  const { state, check: daemonCheck } = await detectDaemon(config);
  const [listeners, ptr, domains] = await Promise.all([
    checkListeners(config, state),
    checkSendingIps(config.server.sending_ips, config.server.hostname, lookups),
    checkDomains(input, state, lookups),
  ]);
  return [configLoaded(input.source), daemonCheck, ...listeners, ...checkStorage(config), ...checkCertificates(config, input.now), ...ptr, ...domains];
}

/** Whether a daemon answers on the control socket of this configuration. */
async function detectDaemon(config: Config): Promise<{ state: DaemonState; check: Check }> {
  const path = controlSocketPath(config);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${DAEMON_ANSWER_MS / 1000} s`)), DAEMON_ANSWER_MS);
  });
  try {
    // The queue status changes nothing in the daemon; any answer at all says that one runs.
    const status = await Promise.race([new ControlClient(path).status(), late]);
    return { state: { kind: 'running' }, check: ok('daemon', `running: it answers on ${path} (${status.totals.queued} messages queued)`) };
  } catch (err) {
    if (err instanceof NoDaemonError) return { state: { kind: 'stopped' }, check: ok('daemon', `not running: nothing answers on ${path}`) };
    const reason = `the control socket ${path} could not be asked: ${(err as Error).message}`;
    return { state: { kind: 'unknown', reason }, check: warn('daemon', reason) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Each domain's records and active DKIM keys. The domains are read from the store, which only a
 * stopped daemon leaves open to us; the store is closed again before DNS is asked.
 */
async function checkDomains(input: DoctorInput, daemon: DaemonState, lookups: Lookups): Promise<Check[]> {
  if (daemon.kind === 'running') {
    return [warn('domains', 'not checked: the running daemon holds the store, and its control socket gives out no domain records to check (only names, or a check that stores its result); stop the daemon and run doctor again for the DNS records and DKIM keys of each domain')];
  }
  const read = await readDomains(resolve(input.config.data.dir));
  if ('check' in read) return [read.check];
  if (read.domains.length === 0) return [warn('domains', 'no domains in the store: add one (postilion domains add) before sending mail')];
  const dkimDir = join(resolve(input.config.keys.dir), 'dkim');
  const checks: Check[] = [];
  // A few domains at a time: each asks about ten questions at once, and the resolver is shared.
  for (let i = 0; i < read.domains.length; i += PARALLEL_DOMAINS) {
    const batch = read.domains.slice(i, i + PARALLEL_DOMAINS);
    const results = await Promise.all(
      batch.map(async (domain) => [
        ...(await checkDomainRecords(domain, input.identity, lookups)),
        ...(await checkActiveDkim(domain, dkimDir, lookups)),
      ]),
    );
    checks.push(...results.flat());
  }
  return checks;
}

/** Every domain record in the store, or why they could not be read. */
async function readDomains(dataDir: string): Promise<{ domains: DomainRecord[] } | { check: Check }> {
  // LevelDB creates a database where none is: look before opening, so the doctor never makes one.
  if (!existsSync(join(dataDir, 'CURRENT'))) return { check: warn('domains', `no store in ${dataDir} yet (data.dir): no domains to check`) };
  let store: Store;
  try {
    store = await Store.open(dataDir);
  } catch (err) {
    if (err instanceof StoreLockedError) return { check: warn('domains', `not checked: ${err.message}`) };
    return { check: fail('domains', `the store in ${dataDir} cannot be opened: ${(err as Error).message}`) };
  }
  try {
    const domains: DomainRecord[] = [];
    for await (const domain of new DomainsRepo(store).all()) domains.push(domain);
    return { domains: domains.sort((a, b) => a.name.localeCompare(b.name)) };
  } finally {
    await store.close();
  }
}
