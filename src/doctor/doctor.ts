import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import type { DoctorReads, HeldListener } from '../control/doctor-protocol.ts';
import { everyDomain } from '../control/doctor-reads.ts';
import { controlSocketPath } from '../control/protocol.ts';
import type { Identity } from '../domains/records.ts';
import { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import { Store, StoreLockedError } from '../store/store.ts';
import { checkCertificates } from './certificates.ts';
import { checkCluster } from './cluster.ts';
import { fail, ok, warn, type Check } from './check.ts';
import { checkControlSocket } from './control-socket.ts';
import { checkActiveDkim } from './dkim.ts';
import { checkDomainRecords } from './dns-records.ts';
import { checkListeners, type DaemonState } from './listeners.ts';
import { createLookups, type Lookups } from './lookups.ts';
import { checkMtaStsPolicies } from './mta-sts.ts';
import { checkSendingIps } from './reverse-dns.ts';
import { checkServedCertificates } from './served-certificates.ts';
import { checkSources } from './sources.ts';
import { checkStorage } from './storage.ts';
import { checkDashboard } from './dashboard.ts';

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
 * the certificates (and those a running daemon serves), the reverse DNS of the sending addresses, the published MTA-STS policies, then each domain's DNS records and
 * active DKIM keys, with the daemon running or not; in cluster mode, the cluster's database and key. Reads only: no record, key or certificate is
 * written (opening a stopped daemon's store lets LevelDB tidy its own files, as any open does).
 * A new check is one more entry of the list below.
 */
export async function runDoctor(input: DoctorInput): Promise<Check[]> {
  const { config } = input;
  const lookups = createLookups(config);
  const { state, reads, check: daemonCheck } = await detectDaemon(config);
  // In the order of the report; the local checks are synchronous, the others wait together.
  const listeners = checkListeners(config, state);
  const local = [checkControlSocket(config, state), ...checkStorage(config), ...checkCertificates(config, input.now), checkDashboard(config)];
  const [fromListeners, ...sections] = await Promise.all([
    listeners,
    checkServedCertificates(config, state, input.now),
    checkSendingIps(config.server.sending_ips, config.server.hostname, lookups),
    checkSources(config.delivery.sources, input.identity, lookups, input.now),
    checkCluster(config),
    checkMtaStsPolicies(config, lookups),
    checkDomains(input, reads, lookups),
  ]);
  return [configLoaded(input.source), daemonCheck, ...fromListeners, ...local, ...sections.flat()];
}

/** Where the domains are read: the running daemon (which holds the store), or the store itself. */
type DomainSource = { kind: 'daemon'; reads: DoctorReads } | { kind: 'store' } | { kind: 'unknown'; reason: string };

/** Resolves `work` or rejects when it takes longer than DAEMON_ANSWER_MS. */
async function inTime<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${DAEMON_ANSWER_MS / 1000} s`)), DAEMON_ANSWER_MS);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a daemon answers on the control socket of this configuration, and which sockets it holds. */
async function detectDaemon(config: Config): Promise<{ state: DaemonState; reads: DomainSource; check: Check }> {
  const path = controlSocketPath(config);
  const client = new ControlClient(path);
  let queued: number;
  try {
    // The queue status changes nothing in the daemon; any answer at all says that one runs.
    queued = (await inTime(client.status())).totals.queued;
  } catch (err) {
    if (err instanceof NoDaemonError)
      return { state: { kind: 'stopped' }, reads: { kind: 'store' }, check: ok('daemon', `not running: nothing answers on ${path}`) };
    const reason = `the control socket ${path} could not be asked: ${(err as Error).message}`;
    return { state: { kind: 'unknown', reason }, reads: { kind: 'unknown', reason }, check: warn('daemon', reason) };
  }
  let held: HeldListener[] | null;
  try {
    held = (await inTime(client.listeners())).listeners;
  } catch {
    // A daemon of a release that does not say: its listeners are judged by binding them.
    held = null;
  }
  return {
    state: { kind: 'running', held },
    reads: { kind: 'daemon', reads: client },
    check: ok('daemon', `running: it answers on ${path} (${queued} messages queued)`),
  };
}

/** Each domain's records and active DKIM keys; the store is closed again before DNS is asked. */
async function checkDomains(input: DoctorInput, source: DomainSource, lookups: Lookups): Promise<Check[]> {
  const read = await readDomains(source, resolve(input.config.data.dir));
  if ('check' in read) return [read.check];
  if (read.domains.length === 0) return [warn('domains', 'no domains in the store: add one (postilion domains add) before sending mail')];
  const dkimDir = join(resolve(input.config.keys.dir), 'dkim');
  const checks: Check[] = [];
  // A few domains at a time: each asks about ten questions at once, and the resolver is shared.
  for (let i = 0; i < read.domains.length; i += PARALLEL_DOMAINS) {
    const batch = read.domains.slice(i, i + PARALLEL_DOMAINS);
    const results = await Promise.all(
      batch.map(async (domain) => [...(await checkDomainRecords(domain, input.identity, lookups)), ...(await checkActiveDkim(domain, dkimDir, lookups))]),
    );
    checks.push(...results.flat());
  }
  const reporting = checkTlsReportingFrom(input.config.tls_reporting, read.domains);
  return reporting ? [...checks, reporting] : checks;
}

/**
 * With TLS reporting on, its reports by mail go out from `tls_reporting.from`: at a domain of this
 * server, so that they are DKIM-signed (RFC 8460 §5.3); a report from elsewhere is not sent.
 */
export function checkTlsReportingFrom(t: Config['tls_reporting'], domains: readonly DomainRecord[]): Check | null {
  if (!t.enabled) return null;
  const at = t.from.lastIndexOf('@');
  const name = at >= 0 ? t.from.slice(at + 1).toLowerCase() : '';
  if (domains.some((d) => d.name.toLowerCase() === name)) return ok('tls-reporting', `reports by mail go out from ${t.from}, DKIM-signed by ${name}`);
  return fail(
    'tls-reporting',
    `tls_reporting.from ${t.from} is not at a domain of this server: TLS reports by mail are not sent (add ${name || 'its domain'} with postilion domains add, or name an address at one)`,
  );
}

/** Every domain record, from the running daemon or the stopped daemon's store, or why they could not be read. */
async function readDomains(source: DomainSource, dataDir: string): Promise<{ domains: DomainRecord[] } | { check: Check }> {
  switch (source.kind) {
    case 'unknown':
      return { check: warn('domains', `not checked: ${source.reason}`) };
    case 'daemon':
      try {
        return { domains: (await inTime(source.reads.domains())).domains };
      } catch (err) {
        return {
          check: warn(
            'domains',
            `not checked: the running daemon did not give out its domains (${(err as Error).message}); a daemon of an older release does not: restart it on this one`,
          ),
        };
      }
    case 'store':
      return readStoreDomains(dataDir);
  }
}

/** Every domain record in a stopped daemon's store. */
async function readStoreDomains(dataDir: string): Promise<{ domains: DomainRecord[] } | { check: Check }> {
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
    return { domains: await everyDomain(new DomainsRepo(store)) };
  } finally {
    await store.close();
  }
}
