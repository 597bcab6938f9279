import { isIP } from 'node:net';
import { validate as validCron } from 'node-cron';
import { z } from 'zod';
import { parseCidr } from '../util/cidr.ts';
import { isLabel, isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { DEFAULT_DATA_DIR } from './source.ts';
import { checkSourceReferences, sourcesShape } from './sources-schema.ts';

/**
 * The one typed configuration. Every option has its default and description here;
 * config/postilion.example.yaml documents the same tree (a test keeps the two in step).
 */

const port = z.number().int().min(0).max(65535);

/** One DNS label: letters, digits, hyphens, not at either end. */
export const label = z.string().refine(isLabel, 'must be a single DNS label (a-z, 0-9, -)');

const cidrList = z
  .array(z.string())
  .default([])
  .superRefine((entries, ctx) => {
    for (const [i, entry] of entries.entries()) {
      try {
        parseCidr(entry);
      } catch (err) {
        ctx.addIssue({ code: 'custom', path: [i], message: (err as Error).message });
      }
    }
  });

const tlsPolicy = z.enum(['required', 'opportunistic', 'off']);

const target = z.strictObject({
  host: z.string().min(1).describe('host name or address to deliver to'),
  port: port.default(25).describe('its SMTP port'),
  tls: tlsPolicy.optional().describe('STARTTLS policy for it (default: delivery.tls)'),
});

const rate = (perSecond: number, burst: number) =>
  z
    .strictObject({
      per_second: z.number().positive().default(perSecond).describe('sustained requests per second, per account'),
      burst: z.number().int().min(1).default(burst).describe('bucket size: requests allowed at once'),
    })
    .prefault({});

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      hostname: z.string().min(1).default('localhost').describe("this server's public host name: EHLO name, DNS record targets, Message-ID fallback"),
      sending_ips: z
        .array(z.string())
        .default([])
        .superRefine((entries, ctx) => {
          for (const [i, entry] of entries.entries()) {
            if (!isIP(entry)) ctx.addIssue({ code: 'custom', path: [i], message: `"${entry}" is not an IP address` });
          }
        })
        .describe('public addresses mail leaves from: the SPF record authorises them (else a:hostname)'),
    })
    .prefault({}),
  dns: z
    .strictObject({
      servers: z.array(z.string()).default([]).describe('resolvers to ask ("127.0.0.1", "[::1]:5353", "10.0.0.2:53"); empty: the system\'s'),
      timeout_ms: z.number().int().min(100).max(60_000).default(5000).describe('per-query timeout'),
      tries: z.number().int().min(1).max(10).default(2).describe('attempts per query'),
      dnssec: z
        .boolean()
        .default(false)
        .describe('trust the AD bit of dns.servers (a validating resolver such as unbound, on a trusted path): DANE TLSA records of MX hosts are enforced'),
    })
    .prefault({}),
  domains: z
    .strictObject({
      check_schedule: z
        .string()
        .refine(validCron, 'not a valid cron expression')
        .default('*/30 * * * *')
        .describe('cron expression of the periodic DNS re-check of every domain'),
      check_cache_seconds: z.number().int().min(0).max(3600).default(60).describe('check-dns returns the last result when it is younger than this'),
      tracking_subdomain: label.default('track').describe('default tracking subdomain of new domains'),
      return_path_subdomain: label.default('rp').describe('default return-path (bounce) subdomain of new domains'),
      subscription_subdomain: label.default('unsub').describe('default subscription-management subdomain of new domains'),
      media_subdomain: label.default('media').describe('default media subdomain of new domains'),
      dmarc_record: z
        .string()
        .startsWith('v=DMARC1')
        .default('v=DMARC1; p=quarantine; sp=none; adkim=r; aspf=r;')
        .describe('the DMARC TXT record suggested to new domains'),
    })
    .prefault({}),
  dkim: z
    .strictObject({
      ed25519: z.boolean().default(false).describe('also sign with an Ed25519 key (RFC 8463), next to RSA-2048'),
      rotation_schedule: z
        .string()
        .refine(validCron, 'not a valid cron expression')
        .default('17 3 * * *')
        .describe('cron expression of the daily rotation job (domains with dkim_rotation_interval_days)'),
      retired_grace_days: z
        .number()
        .int()
        .min(1)
        .max(90)
        .default(7)
        .describe('how long a retired key stays published so that mail signed with it still verifies'),
    })
    .prefault({}),
  messages: z
    .strictObject({
      retention_purge_schedule: z
        .string()
        .refine(validCron, 'not a valid cron expression')
        .default('43 2 * * *')
        .describe('cron expression of the daily purge of message metadata and content past their retention'),
    })
    .prefault({}),
  delivery: z
    .strictObject({
      enabled: z.boolean().default(true).describe('deliver accepted mail (off: mail stays queued)'),
      concurrency: z.number().int().min(1).max(1000).default(20).describe('SMTP transactions in flight at once, in total'),
      per_destination: z.number().int().min(1).max(100).default(5).describe('SMTP transactions in flight at once per destination (MX set)'),
      ready_limit: z
        .number()
        .int()
        .min(10)
        .max(100_000)
        .default(2000)
        .describe('due messages held in memory, waiting for a connection (the rest wait in the store)'),
      messages_per_connection: z.number().int().min(1).max(10_000).default(100).describe('messages sent over one connection before it is closed'),
      idle_timeout_ms: z.number().int().min(100).max(600_000).default(10_000).describe('an unused connection is closed after this long'),
      connect_timeout_ms: z.number().int().min(100).max(300_000).default(30_000).describe('connecting and waiting for the greeting'),
      command_timeout_ms: z.number().int().min(100).max(900_000).default(120_000).describe('waiting for any one reply'),
      mx_port: port.default(25).describe('port of the MX hosts (25; other values only for test set-ups)'),
      tls: tlsPolicy.default('opportunistic').describe('STARTTLS policy: required (defer rather than send in clear), opportunistic, off'),
      tls_reject_unauthorized: z.boolean().default(false).describe('refuse MX certificates that do not verify (most MX certificates are not checked by MTAs)'),
      unreachable_seconds: z.number().int().min(0).max(3600).default(60).describe('a host that could not be reached is skipped for this long'),
      transport: z
        .record(z.string(), target)
        .default({})
        .superRefine((map, ctx) => {
          for (const name of Object.keys(map)) {
            if (!isValidDomain(normalizeDomain(name)))
              ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is not a domain name: transport keys are recipient domain names` });
          }
        })
        .transform((map) => Object.fromEntries(Object.entries(map).map(([name, to]) => [normalizeDomain(name), to])))
        .describe('per recipient domain, deliver to this host instead of its MX (relaying set-ups, tests)'),
      smarthost: target.nullable().default(null).describe('deliver everything not in transport to this host instead of MX'),
      destinations: z
        .record(
          z.string().min(1).max(2048),
          z.strictObject({
            concurrency: z.number().int().min(1).max(1000).optional().describe('jobs in flight at once for this destination'),
            rate: z.number().gt(0).max(100_000).optional().describe('jobs started per second at most'),
          }),
        )
        .default({})
        .describe(
          'limits of single destinations of the job engine: an MX set ("mx1.example.net,mx2.example.net", sorted host names) or a webhook URL origin ("https://hooks.example.com")',
        ),
      mta_sts: z
        .strictObject({
          enabled: z
            .boolean()
            .default(true)
            .describe('honour the MTA-STS policies (RFC 8461) recipient domains publish: enforce defers rather than send in clear or to an unlisted MX'),
          ca_file: z
            .string()
            .default('')
            .describe('PEM file of CA certificates trusted besides the system roots, for policy hosts and MX certificates (private PKI, tests)'),
          port: port.default(443).describe('HTTPS port of the policy hosts (443; other values only for test set-ups)'),
          allow_private: z.boolean().default(false).describe('fetch policies from private, loopback and other special-purpose addresses too'),
          fetch_timeout_ms: z.number().int().min(100).max(60_000).default(10_000).describe('the whole fetch of one policy (size is capped at 64 KiB)'),
          recheck_seconds: z
            .number()
            .int()
            .min(1)
            .max(86_400)
            .default(300)
            .describe("how long a domain's _mta-sts TXT answer is reused before it is asked again"),
        })
        .prefault({}),
      bounce_rules: z.string().default('').describe('reply classification rules file (empty: the bundled config/bounce-rules)'),
      shaping: z
        .boolean()
        .default(true)
        .describe('traffic shaping: limits per lane for the large mailbox providers, and lanes slowed or suspended on their throttling replies'),
      shaping_file: z
        .string()
        .default('')
        .describe('traffic shaping rules over the bundled config/shaping.yaml (same format; a provider of the same key takes the fields given)'),
      retry: z
        .strictObject({
          first_delay_seconds: z.number().int().min(1).max(86_400).default(300).describe('wait after the first deferral; doubles per attempt'),
          max_delay_seconds: z.number().int().min(1).max(86_400).default(7200).describe('longest wait between attempts'),
          max_age_hours: z.number().min(0.01).max(720).default(24).describe('a message still deferred this long after acceptance fails'),
          jitter: z.number().min(0).max(0.5).default(0.2).describe('random spread of each wait (0.2 = ±20 %)'),
        })
        .prefault({}),
      ...sourcesShape,
    })
    .superRefine(checkSourceReferences)
    .prefault({}),
  tls_reporting: z
    .strictObject({
      enabled: z.boolean().default(false).describe('send daily TLS reports (RFC 8460) to the rua of each recipient domain that publishes _smtp._tls'),
      from: z
        .string()
        .max(254)
        .refine((v) => v === '' || /^[^@\s]+@[^@\s]+$/.test(v), 'must be an email address')
        .default('')
        .describe('sender of the reports sent by mail: an address at a Postilion domain, so that they are DKIM-signed (required when enabled)'),
      organization: z.string().max(200).default('').describe('organization-name of the reports (empty: server.hostname)'),
      contact: z.string().max(254).default('').describe('contact-info of the reports (empty: the from address)'),
      schedule: z
        .string()
        .refine(validCron, 'not a valid cron expression')
        .default('17 1 * * *')
        .describe('cron expression (UTC) of the daily job that sends the reports of the UTC days that have ended'),
      flush_seconds: z.number().int().min(1).max(300).default(5).describe('counts of TLS sessions are written to the store this often (and at stop)'),
      max_domains_per_day: z
        .number()
        .int()
        .min(10)
        .max(1_000_000)
        .default(50_000)
        .describe('policy domains counted per day at most; sessions with others are not reported'),
      timeout_ms: z.number().int().min(1000).max(300_000).default(30_000).describe('an https report POST (connect to last byte) is given up after this long'),
      allow_networks: cidrList.describe('networks (CIDR) an https rua may point into although private or loopback; empty: public addresses only'),
      ca_file: z.string().default('').describe('extra PEM CA certificates trusted for https rua targets (private PKI, tests); empty: the system CAs'),
    })
    .prefault({}),
  mta_sts_policy: z
    .strictObject({
      domains: z
        .record(
          z.string(),
          z.strictObject({
            mode: z.enum(['enforce', 'testing', 'none']).describe('the policy mode receivers apply to mail sent to this domain'),
            mx: z
              .array(z.string().regex(/^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/, 'an MX host name, or *.suffix'))
              .min(1)
              .max(100)
              .describe('MX host names (or *.suffix patterns) senders may deliver to over TLS'),
            max_age_seconds: z.number().int().min(0).max(31_557_600).default(604_800).describe('how long senders may cache the policy'),
          }),
        )
        .default({})
        .superRefine((map, ctx) => {
          for (const name of Object.keys(map)) {
            if (!isValidDomain(normalizeDomain(name))) ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is not a domain name` });
          }
        })
        .transform((map) => Object.fromEntries(Object.entries(map).map(([name, policy]) => [normalizeDomain(name), policy])))
        .describe(
          'MTA-STS policies (RFC 8461) this server publishes for its inbound domains: GET /.well-known/mta-sts.txt with Host mta-sts.<domain> on the tracking and API listeners',
        ),
      check_port: port.default(443).describe('port doctor fetches the published policy from (443; other values only for test set-ups)'),
      check_ca_file: z.string().default('').describe('extra PEM CA certificates doctor trusts when it fetches the policy (private PKI, tests)'),
    })
    .prefault({}),
  data: z
    .strictObject({
      dir: z.string().min(1).default(DEFAULT_DATA_DIR).describe('LevelDB data directory (relative paths start at the working directory)'),
    })
    .prefault({}),
  keys: z
    .strictObject({
      dir: z.string().min(1).default('./keys').describe('directory for DKIM private keys, TLS material and the at-rest encryption key'),
    })
    .prefault({}),
  log: z
    .strictObject({
      level: z
        .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default('info')
        .describe('log level of the JSON lines written to stdout (reloadable)'),
    })
    .prefault({}),
  api: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1').describe('address of the plain-HTTP listener'),
      port: port.default(8080).describe('port of the plain-HTTP listener (0 picks a free port)'),
      tls: z
        .strictObject({
          enabled: z.boolean().default(false).describe('also listen with HTTPS'),
          host: z.string().min(1).default('127.0.0.1').describe('address of the HTTPS listener'),
          port: port.default(8443).describe('port of the HTTPS listener'),
          cert: z.string().min(1).default('tls/api.crt').describe('PEM certificate chain, relative to keys.dir (reloadable)'),
          key: z.string().min(1).default('tls/api.key').describe('PEM private key, relative to keys.dir (reloadable)'),
        })
        .prefault({}),
      trusted_proxies: cidrList.describe('peers (CIDR or address) whose X-Forwarded-For and X-Forwarded-Proto are believed (reloadable)'),
      body_limit_bytes: z
        .number()
        .int()
        .min(1024)
        .default(25 * 1024 * 1024)
        .describe('largest accepted request body'),
      body_memory_bytes: z
        .number()
        .int()
        .min(1024)
        .default(256 * 1024 * 1024)
        .describe('request-body bytes held by all requests at once (at least body_limit_bytes); beyond it 503 (reloadable)'),
      auth_failures: z
        .strictObject({
          per_second: z.number().positive().default(1).describe('refused authentications regained per second, per client address'),
          burst: z.number().int().min(1).default(30).describe('refused authentications allowed at once, per client address'),
        })
        .prefault({})
        .describe('per-address limit of refused authentications (v2 and v1); past it 429 (reloadable)'),
      rate_limits: z
        .strictObject({
          general: rate(100, 200).describe('general v2 endpoints'),
          statistics: rate(1, 1).describe('statistics endpoints'),
        })
        .prefault({})
        .describe('per-account token buckets (reloadable)'),
      idempotency: z
        .strictObject({
          lease_seconds: z.number().int().min(1).max(300).default(300).describe('how long an interrupted execution blocks its key'),
          retention_hours: z.number().int().min(1).max(24).default(24).describe('how long an outcome is replayed'),
          secret_retention_seconds: z.number().int().min(1).max(300).default(300).describe('replay window of secret-bearing API-key creations'),
          purge_schedule: z
            .string()
            .refine(validCron, 'not a valid cron expression')
            .default('*/10 * * * *')
            .describe('cron expression of the purge of expired records'),
        })
        .prefault({}),
    })
    .refine((api) => api.body_memory_bytes >= api.body_limit_bytes, {
      path: ['body_memory_bytes'],
      message: 'must be at least body_limit_bytes, or a body of the largest accepted size could never be read',
    })
    .prefault({}),
  smtp: z
    .strictObject({
      submission: z
        .strictObject({
          enabled: z.boolean().default(true).describe('accept mail from applications over SMTP with credentials (AUTH)'),
          host: z.string().min(1).default('127.0.0.1').describe('address of both submission listeners (0.0.0.0 or :: to serve other hosts)'),
          starttls_port: port.nullable().default(2587).describe('port of the STARTTLS listener (587 in production; null: off)'),
          tls_port: port.nullable().default(2465).describe('port of the implicit-TLS listener (465 in production; null: off)'),
          cert: z
            .string()
            .min(1)
            .default('tls/smtp.crt')
            .describe('PEM certificate chain, relative to keys.dir; a self-signed one is made on first start when missing'),
          key: z.string().min(1).default('tls/smtp.key').describe('PEM private key, relative to keys.dir (made with the certificate)'),
          max_message_bytes: z
            .number()
            .int()
            .min(1024)
            .max(200 * 1024 * 1024)
            .default(25 * 1024 * 1024)
            .describe('largest accepted message (announced with SIZE; larger ones get 552)'),
          max_recipients: z.number().int().min(1).max(1000).default(100).describe('recipients per message (more get 452)'),
          max_connections_per_address: z
            .number()
            .int()
            .min(1)
            .max(1000)
            .default(20)
            .describe('sessions one client address may hold at once, per listener (more get 421)'),
          plain_auth_from: cidrList.default(['127.0.0.0/8', '::1/128']).describe('clients (CIDR) that may AUTH without TLS; everyone else must use TLS first'),
          auth_failures: z
            .strictObject({
              limit: z.number().int().min(1).max(1000).default(5).describe('failed AUTH attempts allowed per client address in the window'),
              window_seconds: z.number().int().min(1).max(86_400).default(300).describe('how long failures count; past the limit AUTH gets 454'),
            })
            .prefault({}),
        })
        .prefault({}),
      inbound: z
        .strictObject({
          enabled: z.boolean().default(true).describe("receive mail as the domains' MX: routes, bounces to VERP return paths, complaints"),
          host: z.string().min(1).default('127.0.0.1').describe('address of the inbound listener (0.0.0.0 or :: in production)'),
          port: port.default(2525).describe('port of the inbound listener (25 in production)'),
          max_message_bytes: z
            .number()
            .int()
            .min(1024)
            .max(200 * 1024 * 1024)
            .default(25 * 1024 * 1024)
            .describe('largest accepted message (announced with SIZE; larger ones get 552)'),
          max_recipients: z.number().int().min(1).max(1000).default(100).describe('recipients per message (more get 452)'),
          max_connections_per_address: z.number().int().min(1).max(1000).default(20).describe('sessions one client address may hold at once (more get 421)'),
          spamd: z
            .string()
            .regex(/^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'spamd must be host:port (e.g. 127.0.0.1:783)')
            .nullable()
            .default(null)
            .describe('SpamAssassin spamd (host:port) that scores mail forwarded to routes (spam_score); null: every score is 0'),
          dmarc_policy: z
            .enum(['monitor', 'enforce'])
            .default('monitor')
            .describe(
              "what the MX does with mail for routes that fails its sender's DMARC: monitor records the verdict; enforce refuses p=reject failures at the end of DATA (550 5.7.1) and marks p=quarantine ones in the route payload (quarantine: true)",
            ),
        })
        .prefault({}),
      command_deadline_seconds: z
        .number()
        .min(0.1)
        .max(3600)
        .default(120)
        .describe(
          "time a client has to send one command line from its first byte, on every SMTP listener (as Postfix's smtpd_per_record_deadline: a byte now and then does not extend it); past it 421 4.4.2",
        ),
      data_deadline_seconds: z
        .number()
        .min(0.1)
        .max(86_400)
        .default(900)
        .describe(
          "time a client has to send one message's DATA from the 354 to the final dot, on every SMTP listener; past it 421 4.4.2 (raise it with max_message_bytes for slow links)",
        ),
    })
    .prefault({}),
  events: z
    .strictObject({
      retention_days: z.number().int().min(1).max(3650).default(30).describe('stored events older than this are purged by the daily retention job'),
    })
    .prefault({}),
  webhooks: z
    .strictObject({
      concurrency: z.number().int().min(1).max(1000).default(64).describe('webhook deliveries in flight at once, in total'),
      per_origin: z.number().int().min(1).max(100).default(4).describe('webhook deliveries in flight at once per URL origin (scheme, host, port)'),
      ready_limit: z.number().int().min(10).max(100_000).default(10_000).describe('due webhook deliveries held in memory; the rest wait in the store'),
      allow_networks: cidrList.describe(
        'networks (CIDR) webhook URLs may point into although private, loopback or otherwise special (e.g. "10.0.0.0/8", "127.0.0.1/32"); empty: public addresses only',
      ),
    })
    .prefault({}),
  tracking: z
    .strictObject({
      enabled: z.boolean().default(true).describe('serve the open pixel and click redirects of tracked mail on their own listener'),
      host: z
        .string()
        .min(1)
        .default('127.0.0.1')
        .describe("address of the tracking listener (plain HTTP: put the operator's TLS proxy in front, or turn on tls)"),
      port: port.default(8081).describe('port of the tracking listener (0 picks a free port)'),
      tls: z
        .strictObject({
          enabled: z.boolean().default(false).describe('serve HTTPS on the tracking listener instead of plain HTTP'),
          cert: z.string().min(1).default('tls/tracking.crt').describe('PEM certificate chain covering the tracking host names, relative to keys.dir'),
          key: z.string().min(1).default('tls/tracking.key').describe('PEM private key, relative to keys.dir'),
        })
        .prefault({}),
      link_scheme: z
        .enum(['https', 'http'])
        .default('https')
        .describe('scheme of the tracking links written into mail (https: the listener is behind a TLS proxy or has tls on)'),
      scanner_seconds: z
        .number()
        .int()
        .min(0)
        .max(3600)
        .default(10)
        .describe('an open or click this soon after delivery is flagged is_bot (link scanners of receiving systems)'),
    })
    .prefault({}),
  statistics: z
    .strictObject({
      counters: z
        .boolean()
        .default(true)
        .describe('count events into the statistics counters, in the batch that records each event (off: the statistics endpoints stop counting new mail)'),
    })
    .prefault({}),
  billing: z
    .strictObject({
      monthly_amount: z
        .number()
        .min(0)
        .max(1_000_000_000)
        .default(0)
        .describe("what one top-level account's pooled invoice amounts to per calendar month: the sub-account usage endpoint allocates it by message volume"),
      currency: z
        .string()
        .regex(/^[a-z]{3}$/, 'a lower-case three-letter currency code')
        .default('usd')
        .describe('currency code of monthly_amount, as the usage endpoint shows it'),
    })
    .prefault({}),
  storage: z
    .strictObject({
      // LevelDB flushes its 32 MiB write buffer into a new table (and compacts) before it can take
      // more: below about that much free space its writes start to fail, whatever df says.
      min_free_bytes: z
        .number()
        .int()
        .min(0)
        .default(64 * 1024 * 1024)
        .describe("free bytes the data directory's filesystem must keep; below it new mail is refused and no new delivery attempts start"),
      min_free_percent: z
        .number()
        .min(0)
        .max(50)
        .default(1)
        .describe("…and at least this share of the filesystem's size, in percent (the larger of the two applies)"),
      check_interval_ms: z.number().int().min(100).max(60_000).default(1000).describe('how often free space is read (statfs), in ms'),
    })
    .prefault({}),
  shutdown: z
    .strictObject({
      grace_seconds: z.number().min(0).max(600).default(30).describe('on SIGTERM, how long in-flight work may take before connections are cut'),
    })
    .prefault({}),
  cluster: z
    .strictObject({
      database_url: z
        .string()
        .max(2048)
        .refine((v) => v === '' || /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// URL')
        .default('')
        .describe('PostgreSQL URL of the cluster (postgres://…); empty: one node on its own LevelDB (DESIGN.md §10)'),
      database_url_file: z.string().max(4096).default('').describe('…or a file holding that URL (keeps the password out of the configuration)'),
      node_id: z
        .string()
        .max(63)
        .refine((v) => v === '' || /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(v), 'letters, digits, dot, dash and underscore')
        .default('')
        .describe("this node's name in the cluster, unique (empty: the host name)"),
      key_file: z
        .string()
        .max(4096)
        .default('')
        .describe(
          'the cluster key that seals its secrets in the database; the same file on every node (`postilion cluster init` makes it; empty: keys.dir/cluster.key)',
        ),
      redis_url: z
        .string()
        .max(2048)
        .refine((v) => v === '' || /^rediss?:\/\//.test(v), 'must be a redis:// or rediss:// URL')
        .default('')
        .describe('Redis or Valkey for cluster-wide token buckets (empty: each node enforces its share of each limit)'),
      pool_size: z.number().int().min(2).max(200).default(10).describe('connections of this node to PostgreSQL'),
    })
    .prefault({}),
  metrics: z
    .strictObject({
      enabled: z.boolean().default(true).describe('serve /metrics (Prometheus), /healthz and /readyz on their own listener'),
      host: z.string().min(1).default('127.0.0.1').describe('address of the metrics listener (no authentication: keep it on loopback or a management network)'),
      port: port.default(9464).describe('port of the metrics listener (0 picks a free port)'),
      queue_refresh_seconds: z
        .number()
        .int()
        .min(1)
        .max(3600)
        .default(15)
        .describe('the queue figures are read from the store at most this often (a scan of the due-time index)'),
    })
    .prefault({}),
  dashboard: z
    .strictObject({
      enabled: z.boolean().default(true).describe('serve the web dashboard under /ui/ on the API listeners (false: every /ui path is 404)'),
      session_ttl_minutes: z.number().int().min(5).max(10_080).default(720).describe('a dashboard session ends this long after sign-in'),
      login_link_ttl_seconds: z.number().int().min(30).max(3600).default(600).describe("an operator's one-time sign-in link is valid this long"),
      public_url: z
        .string()
        .max(2048)
        .refine((v) => /^https?:\/\/[^\s/?#]+\/?$/i.test(v), 'must be an http:// or https:// base URL (scheme and host, no path)')
        .nullable()
        .default(null)
        .describe("the base URL `postilion ui login` prints (null: the API listener's own URL)"),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
