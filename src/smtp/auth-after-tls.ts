import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { SMTPServerOptions } from 'smtp-server';
import type { SMTPConnection, SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';
import { ListenerConnection, ListenerServer, type Deadlines } from './listener-server.ts';

/** The reply to AUTH in clear from a client that must use TLS first. */
export const ENCRYPTION_REQUIRED = '5.7.11 Encryption required: send STARTTLS first, then AUTH; the credentials were not used';

/**
 * An smtp-server that offers AUTH only under TLS, except to the clients `mayAuthInClear` names.
 *
 * smtp-server decides AUTH for a whole server: it lists AUTH in every EHLO reply, and its
 * `allowInsecureAuth` either refuses AUTH in clear to everyone or takes credentials in clear from
 * everyone. Submission needs the choice per client, so that a remote client is never invited to send
 * a password in clear while a local application still may. Its connections make that choice in the
 * two command handlers below, before smtp-server reads anything of the credentials.
 */
export class AuthAfterTlsServer extends ListenerServer {
  constructor(
    options: SMTPServerOptions,
    deadlines: Deadlines,
    readonly mayAuthInClear: (remoteAddress: string) => boolean,
  ) {
    // AuthAfterTlsConnection refuses AUTH in clear where it must; smtp-server's own check would
    // refuse it to the allowed clients too.
    super({ ...options, allowInsecureAuth: true }, deadlines);
  }

  protected override newConnection(socket: Socket | TLSSocket, socketOptions?: SMTPConnectionOptions | null): SMTPConnection {
    return new AuthAfterTlsConnection(this, socket, socketOptions);
  }
}

class AuthAfterTlsConnection extends ListenerConnection {
  /** Whether AUTH is withheld from this client now: before TLS, unless it may AUTH in clear. */
  private authWithheld(): boolean {
    return !this.secure && !(this._server as AuthAfterTlsServer).mayAuthInClear(this.remoteAddress);
  }

  override handler_EHLO(command: Buffer, callback: () => void): void {
    if (!this.authWithheld()) return super.handler_EHLO(command, callback);
    // A session's disabledCommands (smtp-server's per-session setting) also leaves AUTH out of the
    // EHLO reply; only for this reply, as a disabled AUTH would also lift smtp-server's rule that
    // MAIL needs AUTH. It is restored before the next command can run.
    const own = this.session.disabledCommands;
    const restore = () => {
      this.session.disabledCommands = own;
    };
    this.session.disabledCommands = [...(own ?? this._server.options.disabledCommands ?? []), 'AUTH'];
    try {
      super.handler_EHLO(command, () => {
        restore();
        callback();
      });
    } finally {
      restore();
    }
  }

  override handler_AUTH(command: Buffer, callback: () => void): void {
    // Before smtp-server decodes the token or asks for a username: nothing of the credentials is read.
    if (this.authWithheld()) {
      this.send(538, ENCRYPTION_REQUIRED);
      return callback();
    }
    super.handler_AUTH(command, callback);
  }
}
