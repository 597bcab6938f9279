import { expect } from 'chai';
import { Command } from 'commander';
import { COMMANDS, commandNamed } from '../../../src/cli/commands.ts';

describe('cli/commands: the command table', () => {
  it('finds the command named as commander reads it: past global options and their values, and after help', () => {
    const cases: Array<[string[], string | undefined]> = [
      [['accounts', 'list'], 'accounts'],
      [['-c', 'queue.yaml', 'queue', 'status'], 'queue'],
      [['--config', 'accounts', 'keys', 'list'], 'keys'],
      [['--config=x.yaml', 'domains'], 'domains'],
      [['-cx.yaml', 'webhooks', 'list'], 'webhooks'],
      [['help', 'routes'], 'routes'],
      [['--version'], undefined],
      [['-V'], undefined],
      [[], undefined],
      [['frobnicate', '--json'], 'frobnicate'],
    ];
    for (const [args, named] of cases) expect(commandNamed(args), args.join(' ')).to.equal(named);
  });

  it('each entry loads a command of its own name, and names are unique', async () => {
    const program = new Command('postilion');
    const context = { program, io: { out: () => undefined, err: () => undefined }, setExit: () => undefined };
    expect(new Set(COMMANDS.map((c) => c.name)).size).to.equal(COMMANDS.length);
    for (const entry of COMMANDS) {
      const command = await entry.load(context);
      expect(command.name(), entry.name).to.equal(entry.name);
      expect(entry.summary.length, entry.name).to.be.within(1, 80);
    }
  });
});
