import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/load.ts';

function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  let dir: string;
  let file: string;

  const write = (yaml: string) => writeFileSync(file, yaml);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-config-'));
    file = join(dir, 'postilion.yaml');
    write('');
  });

  const cwd = process.cwd();

  afterEach(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses the built-in defaults for an empty file', () => {
    const { config, source } = loadConfig({ path: file, env: {} });
    expect(source).to.equal(file);
    expect(config.api.host).to.equal('127.0.0.1');
    expect(config.api.port).to.equal(8080);
    expect(config.data.dir).to.equal('./data');
    expect(config.api.trusted_proxies).to.deep.equal([]);
    expect(config.api.rate_limits.general).to.deep.equal({ per_second: 100, burst: 200 });
  });

  it('uses a value from the YAML file and keeps the defaults beside it', () => {
    write('api:\n  port: 9000\ndata:\n  dir: /var/lib/postilion\n');
    const { config } = loadConfig({ path: file, env: {} });
    expect(config.api.port).to.equal(9000);
    expect(config.api.host).to.equal('127.0.0.1');
    expect(config.data.dir).to.equal('/var/lib/postilion');
  });

  it('lets a POSTILION_SECTION__OPTION variable override a file value, parsed as a number', () => {
    write('api:\n  port: 9000\n');
    const { config } = loadConfig({ path: file, env: { POSTILION_API__PORT: '9001' } });
    expect(config.api.port).to.equal(9001);
  });

  it('parses booleans and lists in environment overrides as YAML', () => {
    const { config } = loadConfig({
      path: file,
      env: {
        POSTILION_API__TLS__ENABLED: 'true',
        POSTILION_API__TRUSTED_PROXIES: '[10.0.0.0/8, "::1"]',
        POSTILION_API__RATE_LIMITS__GENERAL__BURST: '7',
      },
    });
    expect(config.api.tls.enabled).to.equal(true);
    expect(config.api.trusted_proxies).to.deep.equal(['10.0.0.0/8', '::1']);
    expect(config.api.rate_limits.general).to.deep.equal({ per_second: 100, burst: 7 });
  });

  it('ignores environment variables without the POSTILION_ prefix', () => {
    const { config } = loadConfig({ path: file, env: { API__PORT: '1', HOME: '/root' } });
    expect(config.api.port).to.equal(8080);
  });

  it('refuses an unknown key in the file, naming its path', () => {
    write('api:\n  bogus: 1\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('api.bogus');
  });

  it('refuses an unknown top-level section, naming it', () => {
    write('smtp_typo:\n  port: 25\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('smtp_typo');
  });

  it('refuses an unknown POSTILION_ variable, naming the variable', () => {
    const err = configErrorOf(() => loadConfig({ path: file, env: { POSTILION_API__BOGUS: '1' } }));
    expect(err.message).to.contain('POSTILION_API__BOGUS');
  });

  it('refuses a POSTILION_ variable that names an inherited object property, naming the variable', () => {
    const err = configErrorOf(() => loadConfig({ path: file, env: { POSTILION_API__CONSTRUCTOR__NAME: 'x' } }));
    expect(err.message).to.contain('POSTILION_API__CONSTRUCTOR__NAME');
  });

  it('refuses a value of the wrong type, naming its path', () => {
    write('api:\n  port: "eighty"\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('api.port');
  });

  it('refuses a wrong type from the environment, naming the path and the variable', () => {
    const err = configErrorOf(() => loadConfig({ path: file, env: { POSTILION_API__TLS__ENABLED: 'maybe' } }));
    expect(err.message).to.contain('api.tls.enabled');
    expect(err.message).to.contain('POSTILION_API__TLS__ENABLED');
  });

  it('refuses a bad CIDR in api.trusted_proxies', () => {
    write('api:\n  trusted_proxies: ["10.0.0.0/8", "10.0.0.0/99"]\n');
    const err = configErrorOf(() => loadConfig({ path: file, env: {} }));
    expect(err.message).to.contain('api.trusted_proxies.1');
    expect(err.message).to.contain('10.0.0.0/99');
  });

  it('refuses a bad cron expression in api.idempotency.purge_schedule', () => {
    write('api:\n  idempotency:\n    purge_schedule: "every ten minutes"\n');
    const err = configErrorOf(() => loadConfig({ path: file, env: {} }));
    expect(err.message).to.contain('api.idempotency.purge_schedule');
    expect(err.message).to.contain('not a valid cron expression');
  });

  it('refuses a delivery.transport key that is not a domain name, and normalises the good ones', () => {
    write('delivery:\n  transport:\n    "not a domain": { host: 127.0.0.1 }\n');
    const err = configErrorOf(() => loadConfig({ path: file, env: {} }));
    expect(err.message).to.contain('delivery.transport');
    expect(err.message).to.contain('recipient domain names');
    write('delivery:\n  transport:\n    "Example.ORG.": { host: 127.0.0.1, port: 2525 }\n');
    expect(Object.keys(loadConfig({ path: file, env: {} }).config.delivery.transport)).to.deep.equal(['example.org']);
  });

  it('has SMTP command and DATA deadlines (120 s, 900 s by default), and refuses a zero or negative one', () => {
    const defaults = loadConfig({ path: file, env: {} }).config.smtp;
    expect([defaults.command_deadline_seconds, defaults.data_deadline_seconds]).to.deep.equal([120, 900]);
    write('smtp:\n  command_deadline_seconds: 1.5\n  data_deadline_seconds: 30\n');
    const set = loadConfig({ path: file, env: {} }).config.smtp;
    expect([set.command_deadline_seconds, set.data_deadline_seconds]).to.deep.equal([1.5, 30]);
    write('smtp:\n  command_deadline_seconds: 0\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('smtp.command_deadline_seconds');
    write('smtp:\n  data_deadline_seconds: -5\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('smtp.data_deadline_seconds');
  });

  it('refuses an explicit config file that does not exist', () => {
    const missing = join(dir, 'missing.yaml');
    expect(configErrorOf(() => loadConfig({ path: missing, env: {} })).message).to.contain(missing);
  });

  it('refuses a file that is not valid YAML', () => {
    write('api: [unclosed\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('not valid YAML');
  });

  it('refuses a file whose top level is not a mapping', () => {
    write('- a\n- b\n');
    expect(configErrorOf(() => loadConfig({ path: file, env: {} })).message).to.contain('mapping');
  });

  it('reads the file named by POSTILION_CONFIG without treating the variable as an option', () => {
    write('api:\n  port: 9100\n');
    const { config, source } = loadConfig({ env: { POSTILION_CONFIG: file } });
    expect(source).to.equal(file);
    expect(config.api.port).to.equal(9100);
  });

  it('prefers an explicit path over POSTILION_CONFIG', () => {
    write('api:\n  port: 9100\n');
    const other = join(dir, 'other.yaml');
    writeFileSync(other, 'api:\n  port: 9200\n');
    const { config, source } = loadConfig({ path: file, env: { POSTILION_CONFIG: other } });
    expect(source).to.equal(file);
    expect(config.api.port).to.equal(9100);
  });

  describe('without an explicit path', () => {
    it('runs on built-in defaults when the working directory has no config/postilion.yaml', () => {
      process.chdir(dir);
      const { config, source } = loadConfig({ env: {} });
      expect(source).to.equal(null);
      expect(config.api.host).to.equal('127.0.0.1');
      expect(config.api.port).to.equal(8080);
      expect(config.data.dir).to.equal('./data');
    });

    it('reads config/postilion.yaml from the working directory when present', () => {
      mkdirSync(join(dir, 'config'));
      writeFileSync(join(dir, 'config', 'postilion.yaml'), 'api:\n  port: 9300\n');
      process.chdir(dir);
      const { config, source } = loadConfig({ env: {} });
      expect(source).to.equal('config/postilion.yaml');
      expect(config.api.port).to.equal(9300);
    });
  });
});
