import { resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import type { HeldListener } from '../control/doctor-protocol.ts';
import { Relay } from '../message/relay.ts';
import { DataSpool } from '../message/spool.ts';
import { AuthThrottle } from '../smtp/auth-throttle.ts';
import { loadOrCreateCertificate, readCertificate } from '../smtp/certificate.ts';
import { SubmissionListeners } from '../smtp/submission.ts';
import { parseCidr } from '../util/cidr.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';

/** SMTP submission: STARTTLS and implicit-TLS listeners with AUTH, feeding the same accept() as the API. */
export class SubmissionAssembly implements Assembly {
  readonly name = 'smtp-submission';
  /** The deadlines of both SMTP listeners are set here too (the inbound MX takes them as they are). */
  readonly sections = ['smtp.submission', 'smtp.command_deadline_seconds', 'smtp.data_deadline_seconds'];
  private listeners: SubmissionListeners | null = null;

  constructor(private readonly ctx: Context) {}

  async start(): Promise<void> {
    const { config, core, log, bound, metrics, storage } = this.ctx;
    const s = config.smtp.submission;
    if (!s.enabled) return;
    const ports = [
      ...(s.starttls_port !== null ? [{ port: s.starttls_port, secure: false, bound: bound.smtpStarttls ?? undefined }] : []),
      ...(s.tls_port !== null ? [{ port: s.tls_port, secure: true, bound: bound.smtpTls ?? undefined }] : []),
    ];
    if (ports.length === 0) {
      log.warn('smtp.submission is enabled but both of its ports are null: no listener');
      return;
    }
    const certPath = resolve(config.keys.dir, s.cert);
    const tls = await loadOrCreateCertificate(certPath, resolve(config.keys.dir, s.key), config.server.hostname);
    if (tls.created) log.info({ cert: certPath, hostname: config.server.hostname }, 'self-signed SMTP certificate created');
    this.listeners = await SubmissionListeners.start(
      {
        host: s.host,
        ports,
        hostname: config.server.hostname,
        tls,
        maxMessageBytes: s.max_message_bytes,
        maxRecipients: s.max_recipients,
        plainAuthFrom: s.plain_auth_from.map(parseCidr),
        graceMs: config.shutdown.grace_seconds * 1000,
        maxConnectionsPerAddress: s.max_connections_per_address,
        deadlines: { commandMs: config.smtp.command_deadline_seconds * 1000, dataMs: config.smtp.data_deadline_seconds * 1000 },
      },
      {
        credentials: core.smtpCredentials,
        accounts: core.accounts,
        relay: new Relay(
          core.domains,
          core.acceptor,
          core.clock,
          config.server.hostname,
          () => new DataSpool(core.store, core.messagesRepo),
          core.trackingUrls,
        ),
        throttle:
          this.ctx.limits?.authFailures(s.auth_failures.limit, s.auth_failures.window_seconds * 1000) ??
          new AuthThrottle(s.auth_failures.limit, s.auth_failures.window_seconds * 1000, core.clock),
        log,
        storage,
        observer: {
          session: (listener, result) => metrics.smtpSessions.inc({ listener, result }),
          command: (listener, command, result) => metrics.smtpCommands.inc({ listener, command, result }),
        },
      },
    );
  }

  /** The listeners' bound ports (empty when submission is off). */
  get ports(): Array<{ port: number; secure: boolean }> {
    return this.listeners?.ports ?? [];
  }

  ready(): Readiness[] {
    return this.ctx.config.smtp.submission.enabled ? [{ name: 'smtp-submission', ok: this.listeners !== null }] : [];
  }

  held(): HeldListener[] {
    const host = this.ctx.config.smtp.submission.host;
    return this.ports.map((p): HeldListener => ({ name: p.secure ? 'smtp-tls' : 'smtp-starttls', host, port: p.port }));
  }

  /** The certificate files are re-read at every reload while the listeners run. */
  reload(config: Config): () => string[] {
    const s = config.smtp.submission;
    const tls = this.listeners ? readCertificate(resolve(config.keys.dir, s.cert), resolve(config.keys.dir, s.key)) : null;
    return () => {
      if (tls) this.listeners?.reloadTls(tls);
      return tls ? ['smtp-submission'] : [];
    };
  }

  async stopListening(): Promise<void> {
    await this.listeners?.close();
  }
}
