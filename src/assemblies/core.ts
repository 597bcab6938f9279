import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { AccountStatuses, type AccountSignals } from '../accounts/account-status.ts';
import { Accounts } from '../accounts/accounts.ts';
import { ApiKeys } from '../accounts/api-keys.ts';
import { SmtpCredentials } from '../accounts/smtp-credentials.ts';
import { SubAccounts } from '../accounts/sub-accounts.ts';
import { Suppressions } from '../accounts/suppressions.ts';
import { CreditGate, Usage, type ReceptionCount } from '../accounts/usage.ts';
import { Idempotency } from '../api/middleware/idempotency.ts';
import type { Config } from '../config/schema.ts';
import type { QueueAdmin } from '../control/queue-admin.ts';
import { DkimKeyStore } from '../domains/dkim-keys.ts';
import { DnsChecker } from '../domains/dns-checker.ts';
import { Domains } from '../domains/domains.ts';
import type { Identity } from '../domains/records.ts';
import { createResolver, type DnsResolver } from '../domains/resolver.ts';
import { Rotator } from '../domains/rotator.ts';
import { DkimSigner, type SigningSignals } from '../domains/signer.ts';
import { EventRecorder } from '../events/recorder.ts';
import { Routes, type RouteSignals } from '../inbound/routes.ts';
import { Acceptor, type AcceptSignals } from '../message/accept.ts';
import { Messages, type MessageReads } from '../message/messages.ts';
import { Sender } from '../message/send.ts';
import { TemplateEngine } from '../message/template-engine.ts';
import { TargetCounters } from '../queue/target-counters.ts';
import { countersObserver } from '../stats/counters.ts';
import { rebuildCounters } from '../stats/rebuild.ts';
import { Statistics } from '../stats/statistics.ts';
import { AccountsRepo } from '../store/accounts-repo.ts';
import { ApiKeysRepo } from '../store/api-keys-repo.ts';
import { DomainsRepo } from '../store/domains-repo.ts';
import { EventsRepo } from '../store/events-repo.ts';
import { IdempotencyRepo } from '../store/idempotency-repo.ts';
import { InboundRepo } from '../store/inbound-repo.ts';
import { JobIndex } from '../store/job-index.ts';
import { JobsRepo } from '../store/jobs-repo.ts';
import { MessagesRepo } from '../store/messages-repo.ts';
import { MetaRepo, migrate } from '../store/meta.ts';
import { RoutesRepo } from '../store/routes-repo.ts';
import type { StorageSettings } from '../store/storage-guard.ts';
import { Store, type SharedFamilies, type StoreSignals } from '../store/store.ts';
import { SHARED_FAMILIES } from '../store/types.ts';
import { ClusterDkimKeys } from '../cluster/dkim-keys.ts';
import { isClustered, openClusterDb, type ClusterDb, type ClusterSecretName } from '../cluster/database.ts';
import { PublishedMessages } from '../cluster/published-messages.ts';
import { PublishedView } from '../cluster/published-view.ts';
import { Publisher } from '../cluster/publisher.ts';
import { TrackedMessages } from '../cluster/tracked-messages.ts';
import { createLogger } from '../logging/logger.ts';
import { CountersRepo } from '../store/counters-repo.ts';
import { SmtpCredentialsRepo } from '../store/smtp-credentials-repo.ts';
import { SuppressionsRepo } from '../store/suppressions-repo.ts';
import { WebhooksRepo } from '../store/webhooks-repo.ts';
import { TrackingUrlMaker } from '../tracking/endpoint.ts';
import { TrackingTokens } from '../tracking/tokens.ts';
import { parseCidr } from '../util/cidr.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { SecretBox } from '../util/secret-box.ts';
import { Signals, type Emitter } from '../util/signals.ts';
import { systemClock, type Clock } from '../util/time.ts';
import { VerpTokens } from '../util/verp.ts';
import { Webhooks, type WebhookSignals } from '../webhooks/webhooks.ts';

/** Every signal the store and the domain services give (util/signals.ts): the assemblies subscribe to them. */
export interface CoreSignals extends StoreSignals, AcceptSignals, AccountSignals, WebhookSignals, RouteSignals, SigningSignals {}

/** The store, opened and migrated: what everything else is built on. */
export interface Data {
  config: Config;
  store: Store;
  /** What the schema migration on open did (empty when the store was current). */
  migrations: string[];
  /** The job engine's due-time index. */
  jobIndex: JobIndex;
  /** Cursors and suspensions. */
  meta: MetaRepo;
  /** The statistics counters (the store's journal). */
  counters: CountersRepo;
  clock: Clock;
  /** Cluster mode: the cluster's database (null: one node on its own LevelDB). */
  cluster: ClusterDb | null;
}

/** What the services are given at construction from the parts built around them (the daemon's). */
export interface CorePorts {
  signals: Emitter<CoreSignals>;
  /** Whether the job engine holds a message (ready or in flight): it can no longer be cancelled. */
  delivering?: (id: string) => boolean;
  /** Where the services that run on their own (the cluster's publication) log; none when absent. */
  log?: Logger;
}

/** The store and the domain services: what the daemon serves and what admin commands use. */
export interface Core extends Data {
  box: SecretBox;
  accounts: Accounts;
  apiKeys: ApiKeys;
  idempotency: Idempotency;
  domains: Domains;
  dnsChecker: DnsChecker;
  rotator: Rotator;
  signer: DkimSigner;
  resolver: DnsResolver;
  /** The one entrance of messages (API and SMTP submission). */
  acceptor: Acceptor;
  sender: Sender;
  messages: Messages;
  messagesRepo: MessagesRepo;
  /** What the message read API answers from: `messages`, or in cluster mode what every node published. */
  messageReads: MessageReads;
  /** What the tracking endpoint reads of messages: `messagesRepo`, or in cluster mode also other nodes' published messages. */
  trackedMessages: Pick<MessagesRepo, 'get' | 'links' | 'hits' | 'putHits'>;
  /** Cluster mode: publishes this node's messages, events and counters for reads on any node (ClusterAssembly runs it); null on a single node. */
  publisher: Publisher | null;
  domainsRepo: DomainsRepo;
  accountsRepo: AccountsRepo;
  suppressions: Suppressions;
  /** SMTP submission credentials: the API manages them, the SMTP listener authenticates with them. */
  smtpCredentials: SmtpCredentials;
  /** Webhook resources; their secrets are sealed with keys/webhook-secrets.key. */
  webhooks: Webhooks;
  webhooksRepo: WebhooksRepo;
  webhookCounters: TargetCounters;
  events: EventRecorder;
  eventsRepo: EventsRepo;
  /** HTTP job records. */
  jobs: JobsRepo;
  /** Tokens of VERP return paths (key in keys/verp.key). */
  verp: VerpTokens;
  /** Messages received by the inbound MX. */
  inboundRepo: InboundRepo;
  /** Inbound routes; their secrets are sealed with keys/route-secrets.key. */
  routes: Routes;
  routeCounters: TargetCounters;
  /** Account states (suspension with its cascade, soft delete); activations release held mail. */
  accountStatuses: AccountStatuses;
  subAccounts: SubAccounts;
  /** A parent's usage in the billing period, from the statistics counters. */
  usage: Usage;
  /** The statistics queries, over the counters the events write. */
  statistics: Statistics;
  /** Tokens of open pixels and tracked links (key in keys/tracking.key). */
  trackingTokens: TrackingTokens;
  /** Their key, for the tracking listener's thread to check tokens with. */
  trackingKey: Buffer;
  /** The tracking URLs written into tracked mail. */
  trackingUrls: TrackingUrlMaker;
}

export function identityOf(config: Config): Identity {
  // The delivery sources' addresses are addresses mail leaves from: the SPF record authorises them too.
  const sources = Object.values(config.delivery.sources).map((s) => s.address);
  const sendingIps = [...new Set([...config.server.sending_ips, ...sources])];
  return { hostname: config.server.hostname, sendingIps, dmarcRecord: config.domains.dmarc_record };
}

export function storageSettings(config: Config): StorageSettings {
  return { minFreeBytes: config.storage.min_free_bytes, minFreePercent: config.storage.min_free_percent, checkIntervalMs: config.storage.check_interval_ms };
}

/**
 * Opens and migrates the store. In cluster mode (cluster.database_url) the cluster's database
 * first: its schema brought up to date, the cluster key checked; the store keeps the shared
 * families there and hears of other nodes' changes to them.
 */
export async function openData(config: Config, clock: Clock = systemClock, signals?: Emitter<StoreSignals>): Promise<Data> {
  const cluster = isClustered(config) ? await openClusterDb(config) : null;
  let listener: { ready: Promise<void>; close(): Promise<void> } | null = null;
  const shared: SharedFamilies | undefined = cluster
    ? {
        kv: cluster.kv,
        families: SHARED_FAMILIES,
        close: async () => {
          await listener?.close();
          await cluster.close();
        },
      }
    : undefined;
  const counters = new CountersRepo();
  let store: Store;
  try {
    store = await Store.open(resolve(config.data.dir), { journal: counters, signals, shared });
  } catch (err) {
    await cluster?.close();
    throw err;
  }
  try {
    if (cluster) {
      listener = cluster.kv.listen(cluster.connection, (invalidation) => {
        store.heard(invalidation);
        signals?.emit('store.heard', invalidation);
      });
      await listener.ready;
    }
    const migrations = await migrate(store, { buildCounters: () => rebuildCounters(store, counters, new MessagesRepo(store)) });
    return { config, store, migrations, jobIndex: new JobIndex(store), meta: new MetaRepo(store), counters, clock, cluster };
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** The store and the services, for the CLI's commands that work without a daemon. */
export async function openCore(config: Config, clock: Clock = systemClock): Promise<Core> {
  return buildCore(await openData(config, clock), { signals: new Signals<CoreSignals>() });
}

/** The domain services over an open store. */
export function buildCore(data: Data, ports: CorePorts): Core {
  const { config, store, clock } = data;
  const { signals } = ports;
  // One node keeps its secrets in keys/; the nodes of a cluster share those of its database.
  const secretsOf = (file: ClusterSecretName) => {
    const shared = data.cluster?.secrets.get(file);
    return shared ? SecretBox.fromKey(shared) : SecretBox.loadOrCreate(join(config.keys.dir, file));
  };
  const box = secretsOf('secret-box.key');
  const apiKeysRepo = new ApiKeysRepo(store);
  const domainsRepo = new DomainsRepo(store);
  const dkimKeys = data.cluster
    ? new DkimKeyStore(new ClusterDkimKeys(data.cluster.pool, data.cluster.key))
    : DkimKeyStore.inDirectory(join(resolve(config.keys.dir), 'dkim'));
  const domainLocks = new KeyedMutex();
  const keyLocks = new KeyedMutex();
  const resolver = createResolver({ servers: config.dns.servers, timeoutMs: config.dns.timeout_ms, tries: config.dns.tries });
  const eventsRepo = new EventsRepo(store);
  // In cluster mode each event keeps what it counts, for its publication to count it in the cluster's counters.
  const events = new EventRecorder(eventsRepo, clock, config.statistics.counters ? [countersObserver(data.counters, { onEvent: data.cluster !== null })] : []);
  const webhookCounters = new TargetCounters(store, 'webhookCounters');
  const webhooksRepo = new WebhooksRepo(store);
  const routeCounters = new TargetCounters(store, 'routeCounters');
  const domains = new Domains(store, domainsRepo, apiKeysRepo, dkimKeys, domainLocks, keyLocks, clock, {
    trackingSubdomain: config.domains.tracking_subdomain,
    returnPathSubdomain: config.domains.return_path_subdomain,
    subscriptionSubdomain: config.domains.subscription_subdomain,
    mediaSubdomain: config.domains.media_subdomain,
    ed25519: config.dkim.ed25519,
  });
  const messagesRepo = new MessagesRepo(store);
  const messages = new Messages(store, messagesRepo, new KeyedMutex(), clock, ports.delivering);
  const published = data.cluster ? publishedReads(data, data.cluster, { eventsRepo, messagesRepo, messages, log: ports.log }) : null;
  const allowNetworks = config.webhooks.allow_networks.map(parseCidr);
  const accountsRepo = new AccountsRepo(store);
  const statistics = new Statistics(published?.counters ?? data.counters);
  const receptions: ReceptionCount = async (accountId, fromMs, toMs) => {
    const buckets = await statistics.buckets({
      accountId,
      series: 'counts',
      fromMs,
      toMs,
      group: 'month',
      senderDomains: null,
      recipientDomains: null,
      tags: null,
    });
    return buckets.reduce((sum, b) => sum + (typeof b.counts.r === 'number' ? b.counts.r : 0), 0);
  };
  const acceptor = new Acceptor(store, messagesRepo, events, clock, signals, new CreditGate(receptions, clock));
  const accounts = new Accounts(store, accountsRepo, clock);
  const accountStatuses = new AccountStatuses(store, accounts, accountsRepo, clock, signals);
  const apiKeys = new ApiKeys(store, apiKeysRepo, domains.ownership, clock, keyLocks);
  const dnsChecker = new DnsChecker(store, domainsRepo, resolver, events, domainLocks, clock, identityOf(config), config.domains.check_cache_seconds * 1000);
  const trackingKey = secretsOf('tracking.key').rawKey();
  const trackingTokens = new TrackingTokens(trackingKey);
  const trackingUrls = new TrackingUrlMaker(trackingTokens, config.tracking.link_scheme);
  return {
    ...data,
    box,
    accounts,
    accountStatuses,
    subAccounts: new SubAccounts(store, accounts, accountStatuses, accountsRepo, domainsRepo, messagesRepo, apiKeys),
    usage: new Usage(accountsRepo, receptions, clock, () => ({ monthlyAmount: config.billing.monthly_amount, currency: config.billing.currency })),
    apiKeys,
    idempotency: new Idempotency(new IdempotencyRepo(store), box, config.api.idempotency, clock),
    domains,
    dnsChecker,
    rotator: new Rotator(store, domainsRepo, dkimKeys, dnsChecker, domainLocks, clock, {
      ed25519: config.dkim.ed25519,
      retiredGraceDays: config.dkim.retired_grace_days,
    }),
    signer: new DkimSigner(dkimKeys, (name) => domains.signingKeys(name), clock, signals),
    resolver,
    acceptor,
    sender: new Sender(domains, acceptor, clock, new TemplateEngine(), trackingUrls),
    messages,
    messagesRepo,
    messageReads: published?.messages ?? messages,
    trackedMessages: published?.tracked ?? messagesRepo,
    publisher: published?.publisher ?? null,
    domainsRepo,
    accountsRepo,
    suppressions: new Suppressions(store, new SuppressionsRepo(store), domainsRepo, events, clock),
    smtpCredentials: new SmtpCredentials(store, new SmtpCredentialsRepo(store), domainsRepo, clock),
    webhooks: new Webhooks(
      store,
      webhooksRepo,
      domainsRepo,
      secretsOf('webhook-secrets.key'),
      resolver,
      { allowNetworks: () => allowNetworks },
      clock,
      webhookCounters,
      signals,
    ),
    webhooksRepo,
    webhookCounters,
    events,
    eventsRepo,
    jobs: new JobsRepo(store, data.jobIndex),
    verp: new VerpTokens(secretsOf('verp.key').rawKey()),
    inboundRepo: new InboundRepo(store),
    routes: new Routes(store, new RoutesRepo(store), domainsRepo, secretsOf('route-secrets.key'), resolver, () => allowNetworks, routeCounters, clock, signals),
    routeCounters,
    statistics,
    trackingTokens,
    trackingKey,
    trackingUrls,
  };
}

/**
 * Cluster mode: the publication of this node's outbox, and the reads of what every node
 * published (cluster/published-view.ts): messages, statistics counters, and another node's
 * message where an open or click of it arrives.
 */
function publishedReads(
  data: Data,
  cluster: ClusterDb,
  local: { eventsRepo: EventsRepo; messagesRepo: MessagesRepo; messages: Messages; log: Logger | undefined },
): { publisher: Publisher; messages: MessageReads; counters: CountersRepo; tracked: TrackedMessages } {
  const publisher = new Publisher({
    pool: cluster.pool,
    nodeId: cluster.nodeId,
    published: cluster.published,
    store: data.store,
    events: local.eventsRepo,
    messages: local.messagesRepo,
    clock: data.clock,
    log: local.log ?? createLogger('silent'),
    counting: data.config.statistics.counters,
  });
  const view = new PublishedView(cluster.published);
  const viewRepo = new MessagesRepo(view);
  const caughtUp = () => publisher.caughtUp();
  return {
    publisher,
    messages: new PublishedMessages(
      new Messages(view, viewRepo, new KeyedMutex(), data.clock),
      { messages: local.messages, repo: local.messagesRepo },
      cluster.nodeId,
      caughtUp,
    ),
    counters: CountersRepo.published(view.families.counters, caughtUp),
    tracked: new TrackedMessages(local.messagesRepo, viewRepo),
  };
}

/** What the operator's queue view reads of HTTP jobs and suspensions. */
export function jobStore(core: Core): NonNullable<ConstructorParameters<typeof QueueAdmin>[0]['jobs']> {
  return {
    index: core.jobIndex,
    repo: core.jobs,
    meta: core.meta,
    targetUrl: async (kind, id) => (kind === 'webhook' ? await core.webhooksRepo.get(id) : await core.routes.target(id))?.url,
  };
}
