import { Command } from 'commander';
import { ConfigError, loadConfig } from '../config/load.ts';
import { identityOf } from '../assemblies/core.ts';
import { exitCodeOf, STATUSES, worst, type Check } from '../doctor/check.ts';
import { configFailed, runDoctor } from '../doctor/doctor.ts';
import type { CliIo } from './io.ts';

/** Exit status for a configuration that does not load: nothing else can be checked. */
const CONFIG_DOES_NOT_LOAD = 2;

/** One line per check: `FAIL  dns example.com dmarc: …`, multi-line reasons folded. */
export function formatChecks(checks: readonly Check[]): string {
  const lines = checks.map((c) => `${c.status.padEnd(4)}  ${c.check}: ${c.reason.replace(/:\s*\n\s*/g, ': ').replace(/\s*\n\s*/g, '; ')}\n`);
  const counts = STATUSES.map((s) => `${checks.filter((c) => c.status === s).length} ${s}`).join(', ');
  return `${lines.join('')}\n${counts}\n`;
}

/** `postilion doctor`: checks and prints; exit 0 without failures, 1 with, 2 when the config does not load. */
export function doctorCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('doctor')
    .description("check the configuration, listeners, TLS certificates, reverse DNS, and each domain's DNS records and DKIM keys")
    .option('--json', 'print the checks as JSON')
    .action(async (opts: { json?: boolean }) => {
      const print = (checks: Check[]) => io.out(opts.json ? `${JSON.stringify({ status: worst(checks), checks }, null, 2)}\n` : formatChecks(checks));
      let loaded;
      try {
        loaded = loadConfig({ path: program.opts<{ config?: string }>().config });
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        print([configFailed(err.message)]);
        setExit(CONFIG_DOES_NOT_LOAD);
        return;
      }
      const { config, source } = loaded;
      const checks = await runDoctor({ config, source, identity: identityOf(config), now: Date.now() });
      print(checks);
      setExit(exitCodeOf(checks));
    });
}
