import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema } from '../../../src/config/schema.ts';
import { defaultAssetsDir, packageRoot } from '../../../src/dashboard/assets.ts';
import { checkDashboard } from '../../../src/doctor/dashboard.ts';

describe('doctor: the dashboard is built when it is on', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-doctor-ui-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('fails while dashboard.enabled is on and the built page is missing, saying how to build it', () => {
    const check = checkDashboard(configSchema.parse({}), dir);
    expect(check.status).to.equal('FAIL');
    expect(check.reason).to.contain('npm run build');
    expect(check.reason).to.contain(dir);
  });

  it('is OK once the page is built, and OK when the dashboard is off', () => {
    writeFileSync(join(dir, 'index.html'), '<!doctype html>');
    expect(checkDashboard(configSchema.parse({}), dir)).to.deep.include({ check: 'dashboard', status: 'OK' });
    rmSync(join(dir, 'index.html'));
    expect(checkDashboard(configSchema.parse({ dashboard: { enabled: false } }), dir).status).to.equal('OK');
  });

  it("looks in dist/ui under this package's root by default", () => {
    expect(defaultAssetsDir()).to.equal(join(packageRoot(), 'dist', 'ui'));
    expect(packageRoot(join(packageRoot(), 'src', 'dashboard'))).to.equal(packageRoot());
  });
});
