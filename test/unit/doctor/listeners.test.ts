import { expect } from 'chai';
import type { HeldListener } from '../../../src/control/doctor-protocol.ts';
import { judgeControlSocket } from '../../../src/doctor/control-socket.ts';
import { judgeHeldListener, judgeListener, sameSocket, type ListenerSpec } from '../../../src/doctor/listeners.ts';

const inbound: ListenerSpec = { name: 'inbound', option: 'smtp.inbound.port', host: '127.0.0.1', port: 25 };
const held = (name: HeldListener['name'], host: string, port: number): HeldListener => ({ name, host, port });

describe('doctor listener verdicts', () => {
  it("matches the daemon's socket by port, and by address when both are IP addresses however spelled", () => {
    expect(sameSocket(held('inbound', '::1', 25), { ...inbound, host: '[0:0:0:0:0:0:0:1]' })).to.equal(true);
    expect(sameSocket(held('inbound', '127.0.0.1', 25), { ...inbound, host: 'localhost' })).to.equal(true);
    expect(sameSocket(held('inbound', '127.0.0.2', 25), inbound)).to.equal(false);
    expect(sameSocket(held('inbound', '127.0.0.1', 2525), inbound)).to.equal(false);
  });

  it('is OK for a socket the daemon holds under this name, and for port 0 names what it picked', () => {
    expect(judgeHeldListener(inbound, [held('inbound', '127.0.0.1', 25)], null)).to.deep.equal({
      check: 'listener inbound',
      status: 'OK',
      reason: '127.0.0.1:25 is in use by the running daemon',
    });
    expect(judgeHeldListener({ ...inbound, port: 0 }, [held('inbound', '127.0.0.1', 40000)], null).reason).to.equal(
      'smtp.inbound.port is 0: the running daemon picked 127.0.0.1:40000',
    );
  });

  it("fails an address another process holds, warns one that is free or held by another of the daemon's listeners", () => {
    const moved = [held('inbound', '127.0.0.1', 2525)];
    expect(judgeHeldListener(inbound, moved, { free: false, code: 'EADDRINUSE' }).status).to.equal('FAIL');
    expect(judgeHeldListener(inbound, [], { free: false, code: 'EADDRINUSE' }).reason).to.contain(
      'not by the running daemon (the running daemon has no inbound listener)',
    );
    expect(judgeHeldListener(inbound, moved, { free: true }).status).to.equal('WARN');
    expect(judgeHeldListener({ ...inbound, port: 0 }, [], null)).to.deep.equal({
      check: 'listener inbound',
      status: 'WARN',
      reason: 'the running daemon has no inbound listener: restart it to apply this configuration; smtp.inbound.port is 0: a free port is picked at start',
    });
    const swapped = judgeHeldListener(inbound, [held('api', '127.0.0.1', 25), ...moved], null);
    expect(swapped.status).to.equal('WARN');
    expect(swapped.reason).to.contain("held by the running daemon's api listener");
    expect(judgeHeldListener(inbound, moved, { free: false, code: 'EACCES' }).reason).to.contain('ports below 1024 need root');
  });

  it('fails a port in use when no daemon runs, naming the option', () => {
    const check = judgeListener(inbound, { free: false, code: 'EADDRINUSE' }, { kind: 'stopped' });
    expect(check.status).to.equal('FAIL');
    expect(check.reason).to.match(/in use by another process .*\(smtp\.inbound\.port\)$/);
  });

  it('judges the control socket: answering, bindable, stale, taken, too long, not writable', () => {
    const path = '/var/lib/postilion/control.sock';
    expect(judgeControlSocket(path, { kind: 'bindable', stale: false }, { kind: 'running', held: [] }).status).to.equal('OK');
    expect(judgeControlSocket(path, { kind: 'bindable', stale: true }, { kind: 'stopped' }).reason).to.contain('replaced at start');
    expect(judgeControlSocket(path, { kind: 'not-a-socket' }, { kind: 'stopped' }).status).to.equal('FAIL');
    expect(judgeControlSocket(path, { kind: 'too-long', bytes: 130 }, { kind: 'stopped' }).reason).to.contain('130 bytes');
    expect(judgeControlSocket(path, { kind: 'not-writable', dir: '/var/lib', code: 'EACCES' }, { kind: 'stopped' }).reason).to.contain(
      '/var/lib is not writable',
    );
    expect(judgeControlSocket(path, { kind: 'bindable', stale: false }, { kind: 'unknown', reason: 'no answer within 5 s' }).status).to.equal('WARN');
  });
});
