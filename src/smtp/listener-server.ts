import { isUtf8 } from 'node:buffer';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { TLSSocket } from 'node:tls';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { SMTPConnection, type SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';
import type { SMTPStream } from 'smtp-server/lib/smtp-stream.js';

/** How long a client may take to send one command line, and one message's DATA. */
export interface Deadlines {
  commandMs: number;
  dataMs: number;
}

/** A reply text that already begins with its enhanced status code (RFC 3463): "5.7.1 …". */
const ENHANCED_TEXT = /^[245]\.\d{1,3}\.\d{1,3} /;

/**
 * The smtp-server both listeners (submission and inbound MX) run on, with what smtp-server
 * leaves to its users:
 * - ENHANCEDSTATUSCODES advertised and an x.y.z code in every reply but the greeting and the EHLO
 *   reply (RFC 2034 §3). Our own replies carry their code at the start of their text; smtp-server
 *   adds its generic one only to replies that have none.
 * - Deadlines, as Postfix's smtpd_per_record_deadline: smtp-server's idle timeout restarts with
 *   every byte, so a client dripping one byte every few seconds would hold a session for ever.
 *   A command line must be complete within `commandMs` of its first byte, a message's DATA within
 *   `dataMs` of the 354; otherwise `421 4.4.2` and the connection is closed.
 * - SMTPUTF8 (RFC 6531): an address with non-ASCII octets is taken only in a transaction whose
 *   MAIL FROM carried the SMTPUTF8 parameter, and only as valid UTF-8; else 553 5.6.7.
 */
export class ListenerServer extends SMTPServer {
  constructor(
    options: SMTPServerOptions,
    readonly deadlines: Deadlines,
  ) {
    super({ ...options, hideENHANCEDSTATUSCODES: false });
  }

  /**
   * SMTPServer.connect of smtp-server 3.21.6, with our connection class: smtp-server has no option
   * for it. test/unit/smtp/auth-after-tls.test.ts fails when an upgrade changes the original.
   */
  override connect(socket: Socket | TLSSocket, socketOptions?: SMTPConnectionOptions | null): void {
    const connection = this.newConnection(socket, socketOptions);
    this.connections.add(connection);
    connection.on('error', (err: Error) => this._onError(err));
    connection.on('connect', (data: Parameters<SMTPServer['_onClientConnect']>[0]) => this._onClientConnect(data));
    connection.init();
  }

  protected newConnection(socket: Socket | TLSSocket, socketOptions?: SMTPConnectionOptions | null): SMTPConnection {
    return new ListenerConnection(this, socket, socketOptions);
  }
}

export class ListenerConnection extends SMTPConnection {
  private commandTimer: NodeJS.Timeout | null = null;
  private dataTimer: NodeJS.Timeout | null = null;

  override send(code: number, data?: string | string[] | null, context?: string | false): void {
    if (typeof data === 'string' && ENHANCED_TEXT.test(data)) return super.send(code, data, false);
    super.send(code, data, context);
  }

  /** The parser, watched: a line's first byte arms the command deadline, the end of DATA disarms its own. */
  override _createParser(): SMTPStream {
    const parser = super._createParser();
    const write = parser._write.bind(parser);
    parser._write = (chunk, encoding, next) => {
      // Bytes of a command line (not of a message): the line must be complete within the deadline.
      if (chunk.length > 0 && !parser._dataMode && this.commandTimer === null) {
        this.commandTimer = this.deadline(this.deadlines.commandMs, 'command line');
      }
      write(chunk, encoding, next);
    };
    const endData = parser._endDataMode.bind(parser);
    parser._endDataMode = (chunk, remainder, callback) => {
      this.disarm('data');
      endData(chunk, remainder, callback);
    };
    return parser;
  }

  override _onCommand(command: Buffer, callback?: () => void): void {
    // The line is complete: what the server does with it is not the client's time.
    this.disarm('command');
    super._onCommand(command, callback);
  }

  override handler_MAIL(command: Buffer, callback: () => void): void {
    const refusal = nonAscii(command);
    if (refusal === null) return super.handler_MAIL(command, callback);
    const parsed = refusal === 'ascii-only' ? this._parseAddressCommand('mail from', command) : false;
    // The SMTPUTF8 parameter on this very MAIL FROM allows its own UTF-8 address.
    if (parsed && parsed.args && (parsed.args as Record<string, unknown>).SMTPUTF8 === true) return super.handler_MAIL(command, callback);
    this.send(553, refusal === 'ascii-only' ? utf8Needed('sender') : '5.1.7 The sender address is not valid UTF-8');
    callback();
  }

  override handler_RCPT(command: Buffer, callback: () => void): void {
    const refusal = nonAscii(command);
    if (refusal === null || (refusal === 'ascii-only' && this.session.envelope.smtpUtf8)) return super.handler_RCPT(command, callback);
    this.send(553, refusal === 'ascii-only' ? utf8Needed('recipient') : '5.1.3 The recipient address is not valid UTF-8');
    callback();
  }

  override handler_DATA(command: Buffer, callback: () => void): void {
    super.handler_DATA(command, callback);
    if (this._parser && this._parser._dataMode && this.dataTimer === null) {
      this.dataTimer = this.deadline(this.deadlines.dataMs, 'message data');
    }
  }

  override _onClose(): void {
    this.disarm('command');
    this.disarm('data');
    super._onClose();
  }

  private get deadlines(): Deadlines {
    return (this._server as ListenerServer).deadlines;
  }

  private deadline(ms: number, what: string): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (what === 'command line') this.commandTimer = null;
      else this.dataTimer = null;
      this.send(421, `4.4.2 ${this.name} Error: timeout exceeded: the ${what} was not complete within ${ms / 1000} s; closing connection`);
    }, ms);
    timer.unref();
    return timer;
  }

  private disarm(which: 'command' | 'data'): void {
    const timer = which === 'command' ? this.commandTimer : this.dataTimer;
    if (timer === null) return;
    clearTimeout(timer);
    if (which === 'command') this.commandTimer = null;
    else this.dataTimer = null;
  }
}

/** Null for an all-ASCII command; else whether it is valid UTF-8 (it needs SMTPUTF8) or not. */
function nonAscii(command: Buffer): 'ascii-only' | 'invalid' | null {
  for (let i = 0; i < command.length; i++) {
    if (command[i]! > 0x7f) return isUtf8(command) ? 'ascii-only' : 'invalid';
  }
  return null;
}

function utf8Needed(role: 'sender' | 'recipient'): string {
  return `5.6.7 Non-ASCII ${role} address not permitted without SMTPUTF8: send MAIL FROM with the SMTPUTF8 parameter (RFC 6531)`;
}

/** Socket errors that only mean the client went away (or was cut at a deadline): no stack, no alarm. */
const CLIENT_GONE = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'ECONNECTION', 'ERR_STREAM_PREMATURE_CLOSE']);

/** Whether an error of a session or of its DATA stream is the client leaving, not a failure of ours. */
export function isClientGone(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CLIENT_GONE.has(code);
}

/**
 * The listener's 'error' handler: a client that went away is an info line without a stack (it
 * happens every day on port 25); anything else a warning with the error.
 */
export function logSessionErrors(log: Logger, listener: string): (err: Error) => void {
  return (err) => {
    const { code, remoteAddress } = err as Error & { code?: string; remoteAddress?: string };
    if (isClientGone(err)) log.info({ client: remoteAddress, code }, `${listener} client disconnected`);
    else log.warn({ err }, `${listener} connection error`);
  };
}
