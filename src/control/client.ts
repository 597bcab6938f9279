import { request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { DomainRecord } from '../store/records.ts';
import { AppError } from '../util/errors.ts';
import type {
  AccountPoolInput,
  AccountView,
  AdminOperation,
  AdminOperations,
  CreatedKey,
  DomainInput,
  DomainSummary,
  DomainView,
  KeyInput,
  KeyView,
  NewAccountInput,
  NewDomainInput,
  NewKeyInput,
  RotationView,
  SmtpHeaderFromInput,
  SmtpHeaderFromView,
  SuspendAccountInput,
  VerifyDomainInput,
} from './admin-protocol.ts';
import type {
  AccountInput,
  AddressInput,
  CredentialView,
  EnableInput,
  MessageInput,
  MessageTrace,
  ResourceInput,
  RouteView,
  SuppressionsInput,
  SuppressionView,
  WebhookView,
} from './resource-protocol.ts';
import { DOCTOR_PATHS, type DoctorReads, type HeldListener } from './doctor-protocol.ts';
import {
  adminPath,
  type DrainLine,
  type DrainProgress,
  type DrainResult,
  type ListQuery,
  type PurgeResult,
  type QueueList,
  type QueueOperations,
  type QueueStatus,
  type RetryResult,
  type Selection,
  type SuspendResult,
} from './protocol.ts';

/** No daemon listens on the control socket (none, or a file left by a crash): nothing was sent. */
export class NoDaemonError extends Error {
  override name = 'NoDaemonError';
}

/** The queue and admin operations of a running daemon, asked over its control socket. */
export class ControlClient implements QueueOperations, AdminOperations, DoctorReads {
  constructor(private readonly path: string) {}

  status(): Promise<QueueStatus> {
    return this.call('GET', '/v1/queue/status');
  }

  list(query: ListQuery): Promise<QueueList> {
    const params = new URLSearchParams();
    if (query.domain !== undefined) params.set('domain', query.domain);
    if (query.account !== undefined) params.set('account', query.account);
    if (query.state !== undefined) params.set('state', query.state);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const search = params.toString();
    return this.call('GET', `/v1/queue/messages${search ? `?${search}` : ''}`);
  }

  retry(selection: Selection): Promise<RetryResult> {
    return this.call('POST', '/v1/queue/retry', selection);
  }

  purge(selection: Selection): Promise<PurgeResult> {
    return this.call('POST', '/v1/queue/purge', selection);
  }

  suspend(destination: string): Promise<SuspendResult> {
    return this.call('POST', '/v1/queue/suspend', { destination });
  }

  resume(destination: string): Promise<SuspendResult> {
    return this.call('POST', '/v1/queue/resume', { destination });
  }

  createAccount(input: NewAccountInput): Promise<AccountView> {
    return this.admin('createAccount', input);
  }

  listAccounts(input: Record<string, never>): Promise<{ accounts: AccountView[] }> {
    return this.admin('listAccounts', input);
  }

  suspendAccount(input: SuspendAccountInput): Promise<AccountView> {
    return this.admin('suspendAccount', input);
  }

  unsuspendAccount(input: AccountInput): Promise<AccountView> {
    return this.admin('unsuspendAccount', input);
  }

  setSmtpHeaderFrom(input: SmtpHeaderFromInput): Promise<SmtpHeaderFromView> {
    return this.admin('setSmtpHeaderFrom', input);
  }

  setAccountPool(input: AccountPoolInput): Promise<AccountView> {
    return this.admin('setAccountPool', input);
  }

  createKey(input: NewKeyInput): Promise<CreatedKey> {
    return this.admin('createKey', input);
  }

  listKeys(input: AccountInput): Promise<{ keys: KeyView[] }> {
    return this.admin('listKeys', input);
  }

  deleteKey(input: KeyInput): Promise<KeyView> {
    return this.admin('deleteKey', input);
  }

  addDomain(input: NewDomainInput): Promise<DomainView> {
    return this.admin('addDomain', input);
  }

  listDomains(input: AccountInput): Promise<{ domains: DomainSummary[] }> {
    return this.admin('listDomains', input);
  }

  checkDomain(input: DomainInput): Promise<DomainView> {
    return this.admin('checkDomain', input);
  }

  rotateDkim(input: DomainInput): Promise<RotationView> {
    return this.admin('rotateDkim', input);
  }

  verifyDomain(input: VerifyDomainInput): Promise<DomainView> {
    return this.admin('verifyDomain', input);
  }

  listeners(): Promise<{ listeners: HeldListener[] }> {
    return this.call('GET', DOCTOR_PATHS.listeners);
  }

  domains(): Promise<{ domains: DomainRecord[] }> {
    return this.call('GET', DOCTOR_PATHS.domains);
  }

  /**
   * The daemon's backup stream (backup/format.ts), as it comes: its end frame says it is whole.
   * An error before the stream starts is the daemon's answer.
   */
  backup(): Promise<AsyncIterable<Buffer>> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: this.path, method: 'GET', path: '/v1/backup', agent: false }, (res) => {
        if (res.statusCode === 200) return resolve(res);
        answerError(res, reject);
      });
      req.on('error', (err) => reject(this.connectError(err)));
      req.end();
    });
  }

  /**
   * `postilion queue drain` on the running daemon: `progress` is called with each step as it
   * comes; resolves with the result, rejects with the daemon's refusal or the error that ended it.
   */
  drain(to: string, waitSeconds: number | undefined, progress: (step: DrainProgress) => void): Promise<DrainResult> {
    const payload = JSON.stringify({ to, ...(waitSeconds === undefined ? {} : { wait_seconds: waitSeconds }) });
    return new Promise<DrainResult>((resolve, reject) => {
      const req = request(
        {
          socketPath: this.path,
          method: 'POST',
          path: '/v1/queue/drain',
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          if (res.statusCode !== 200) return answerError(res, reject);
          let result: DrainResult | null = null;
          let failure: Error | null = null;
          let rest = '';
          res.setEncoding('utf8');
          res.on('data', (text: string) => {
            const lines = (rest + text).split('\n');
            rest = lines.pop() ?? '';
            for (const line of lines) {
              if (line === '') continue;
              let parsed: DrainLine;
              try {
                parsed = JSON.parse(line) as DrainLine;
              } catch {
                failure = new Error(`the daemon answered a line that is not JSON: ${line.slice(0, 200)}`);
                continue;
              }
              if ('progress' in parsed) progress(parsed.progress);
              else if ('result' in parsed) result = parsed.result;
              else
                failure =
                  parsed.error.status === 500
                    ? new Error(`the daemon failed: ${parsed.error.message}`)
                    : new AppError(parsed.error.status, parsed.error.message);
            }
          });
          res.on('error', reject);
          res.on('end', () => {
            if (failure) reject(failure);
            else if (result) resolve(result);
            else reject(new Error('the daemon ended the drain without its result (it may have stopped): run `postilion queue status` to see what is left'));
          });
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => reject(this.connectError(err)));
      req.end(payload);
    });
  }

  /** `postilion ui login`: a one-time dashboard sign-in link for the operator (a secret). */
  uiLogin(): Promise<{ url: string; expires_at: string }> {
    return this.call('POST', '/v1/ui/login', {});
  }

  /** `postilion ui logout --all`: every dashboard session ended. */
  uiLogoutAll(): Promise<{ revoked: number }> {
    return this.call('POST', '/v1/ui/logout-all', {});
  }

  /** Whether a daemon answers on the socket (it accepts a connection). */
  answers(): Promise<boolean> {
    return new Promise((resolve, reject) => {
      const socket = connect(this.path);
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => {
        const e = this.connectError(err);
        if (e instanceof NoDaemonError) resolve(false);
        else reject(e);
      });
    });
  }

  private connectError(err: NodeJS.ErrnoException): Error {
    if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') return new NoDaemonError(`no daemon answers on ${this.path}`);
    if (err.code === 'EACCES')
      return new AppError(403, `cannot open the control socket ${this.path}: permission denied (run the command as the user the daemon runs as)`);
    return new Error(`control socket ${this.path}: ${err.message}`);
  }

  listCredentials(input: AccountInput): Promise<{ credentials: CredentialView[] }> {
    return this.admin('listCredentials', input);
  }

  showCredential(input: ResourceInput): Promise<CredentialView> {
    return this.admin('showCredential', input);
  }

  deleteCredential(input: ResourceInput): Promise<CredentialView> {
    return this.admin('deleteCredential', input);
  }

  listWebhooks(input: AccountInput): Promise<{ webhooks: WebhookView[] }> {
    return this.admin('listWebhooks', input);
  }

  showWebhook(input: ResourceInput): Promise<WebhookView> {
    return this.admin('showWebhook', input);
  }

  enableWebhook(input: EnableInput): Promise<WebhookView> {
    return this.admin('enableWebhook', input);
  }

  deleteWebhook(input: ResourceInput): Promise<WebhookView> {
    return this.admin('deleteWebhook', input);
  }

  listRoutes(input: AccountInput): Promise<{ routes: RouteView[] }> {
    return this.admin('listRoutes', input);
  }

  showRoute(input: ResourceInput): Promise<RouteView> {
    return this.admin('showRoute', input);
  }

  enableRoute(input: EnableInput): Promise<RouteView> {
    return this.admin('enableRoute', input);
  }

  deleteRoute(input: ResourceInput): Promise<RouteView> {
    return this.admin('deleteRoute', input);
  }

  listSuppressions(input: SuppressionsInput): Promise<{ suppressions: SuppressionView[] }> {
    return this.admin('listSuppressions', input);
  }

  showSuppression(input: AddressInput): Promise<{ suppressions: SuppressionView[] }> {
    return this.admin('showSuppression', input);
  }

  deleteSuppression(input: AddressInput): Promise<{ email: string; removed: number }> {
    return this.admin('deleteSuppression', input);
  }

  showMessage(input: MessageInput): Promise<MessageTrace> {
    return this.admin('showMessage', input);
  }

  private admin<T>(operation: AdminOperation, input: object): Promise<T> {
    return this.call('POST', adminPath(operation), input);
  }

  /**
   * One request. A refused connection (or no socket file) is a NoDaemonError, so the caller can
   * open the store instead; anything after the connection is made is an error of its own, since
   * the daemon may have acted on the request.
   */
  private call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const req = request(
        {
          socketPath: this.path,
          method,
          path,
          agent: false,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              return reject(new Error(`the daemon answered ${res.statusCode} with a body that is not JSON: ${text.slice(0, 200)}`));
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) return resolve(parsed as T);
            const said = (parsed as { message?: unknown } | null)?.message;
            const message = typeof said === 'string' ? said : `the daemon answered ${status}`;
            // The daemon's AppErrors (bad input, DNS unavailable: 4xx, 503) are the operator's to
            // act on (exit 2), as they are in-process; only an unexpected failure answers 500.
            reject(status === 500 ? new Error(`the daemon failed: ${message}`) : new AppError(status, message));
          });
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => reject(this.connectError(err)));
      req.end(payload);
    });
  }
}

/** A refusal the daemon answered before a stream: its `{message}`, as an AppError (500: its failure). */
function answerError(res: IncomingMessage, reject: (err: Error) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('error', reject);
  res.on('end', () => {
    let said: unknown;
    try {
      said = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message?: unknown }).message;
    } catch {
      said = undefined;
    }
    const message = typeof said === 'string' ? said : `the daemon answered ${res.statusCode}`;
    reject(res.statusCode === 500 ? new Error(`the daemon failed: ${message}`) : new AppError(res.statusCode ?? 500, message));
  });
}
