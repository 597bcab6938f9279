import { expect } from 'chai';
import { SMTPServer } from 'smtp-server';
import { AuthAfterTlsServer } from '../../../src/smtp/auth-after-tls.ts';

/** SMTPServer.connect of smtp-server 3.21.6, which ListenerServer.connect (so AuthAfterTlsServer's) repeats with its own connection class. */
const COPIED_CONNECT = `connect(socket, socketOptions) {
  let connection = new SMTPConnection(this, socket, socketOptions);
  this.connections.add(connection);
  connection.on('error', err => this._onError(err));
  connection.on('connect', data => this._onClientConnect(data));
  connection.init();
}`;

/** Whitespace folded, and the class name as written (the CommonJS build, which tests load, qualifies it). */
const squeeze = (code: string) =>
  code
    .replace(/\s+/g, ' ')
    .replace(/new [\w$]+\.SMTPConnection\(/, 'new SMTPConnection(')
    .trim();

describe('AuthAfterTlsServer', () => {
  it('repeats SMTPServer.connect as smtp-server has it (an upgrade that changes it must be read again)', () => {
    expect(squeeze(SMTPServer.prototype.connect.toString())).to.equal(squeeze(COPIED_CONNECT));
    expect(AuthAfterTlsServer.prototype.connect).to.not.equal(SMTPServer.prototype.connect);
  });

  it('keeps allowInsecureAuth on, so that the clients it names may AUTH in clear', () => {
    const server = new AuthAfterTlsServer({ logger: false, allowInsecureAuth: false }, { commandMs: 1000, dataMs: 1000 }, () => true);
    expect(server.options.allowInsecureAuth).to.equal(true);
    server.server.close();
  });
});
