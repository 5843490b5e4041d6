import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { config, copyTree, ignitionEnv, stageOk, systemctl, systemctlPath, unitLinks, type Env } from './ignition-helpers.js';

let env: Env;
afterEach(() => env?.cleanup());

const SYSTEMCTL = systemctlPath();
if (SYSTEMCTL === null) console.warn('systemctl is not installed: the cross-checks against `systemctl --root` are skipped');

const unit = (install: string) => `[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n[Install]\n${install}\n`;
const link = (tree: string, p: string) => fs.readlinkSync(path.join(tree, 'etc/systemd/system', p));
const has = (tree: string, p: string) => {
  try {
    fs.lstatSync(path.join(tree, 'etc/systemd/system', p));
    return true;
  } catch {
    return false;
  }
};

/**
 * The reference: the same unit files written into a copy of the booted tree, then
 * `systemctl --root=COPY` run with the verbs the config asks for. stagedroot's enable is
 * systemctl's reenable (old links go first).
 */
async function reference(env: Env, files: Record<string, string>, verbs: string[][]): Promise<string[]> {
  const copy = copyTree(env.booted, path.join(env.scratch, `systemctl-${Math.random().toString(16).slice(2)}`));
  for (const [p, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(copy, p)), { recursive: true });
    fs.rmSync(path.join(copy, p), { force: true });
    fs.writeFileSync(path.join(copy, p), text);
  }
  for (const v of verbs) await systemctl(copy, ...v);
  return unitLinks(copy);
}

describe('Ignition systemd.units', () => {
  it('writes unit contents and drop-ins, and enables the unit from its [Install] section', async () => {
    env = await ignitionEnv();
    const contents = unit('WantedBy=multi-user.target\nRequiredBy=network-online.target\nAlias=web-alias.service\nAlso=helper.socket');
    // Service= names a unit the tree has: systemd-analyze verify (on by default) rejects a socket without its service.
    const helper = '[Socket]\nListenStream=8080\nService=web.service\n[Install]\nWantedBy=sockets.target\n';
    const tree = await stageOk(env, config({
      systemd: {
        units: [
          { name: 'web.service', enabled: true, contents, dropins: [{ name: '10-env.conf', contents: '[Service]\nEnvironment=A=1\n' }, { name: '20-empty.conf' }] },
          { name: 'helper.socket', contents: helper },
        ],
      },
    }));
    expect(fs.readFileSync(path.join(tree, 'etc/systemd/system/web.service'), 'utf8')).toBe(contents);
    expect(fs.readFileSync(path.join(tree, 'etc/systemd/system/web.service.d/10-env.conf'), 'utf8')).toBe('[Service]\nEnvironment=A=1\n');
    expect(has(tree, 'web.service.d/20-empty.conf')).toBe(false); // Ignition skips empty drop-ins
    expect(link(tree, 'multi-user.target.wants/web.service')).toBe('/etc/systemd/system/web.service');
    expect(link(tree, 'network-online.target.requires/web.service')).toBe('/etc/systemd/system/web.service');
    expect(link(tree, 'web-alias.service')).toBe('/etc/systemd/system/web.service');
    expect(link(tree, 'sockets.target.wants/helper.socket')).toBe('/etc/systemd/system/helper.socket');
    if (SYSTEMCTL) {
      const ref = await reference(env, { 'etc/systemd/system/web.service': contents, 'etc/systemd/system/helper.socket': helper }, [['reenable', 'web.service']]);
      expect(unitLinks(tree)).toEqual(ref);
    }
  });

  it('enables a unit that exists only in the base tree (usr/lib/systemd/system)', async () => {
    env = await ignitionEnv();
    const tree = await stageOk(env, config({ systemd: { units: [{ name: 'vendor.service', enabled: true }] } }));
    expect(link(tree, 'multi-user.target.wants/vendor.service')).toBe('/usr/lib/systemd/system/vendor.service');
    expect(link(tree, 'vendor-alias.service')).toBe('/usr/lib/systemd/system/vendor.service');
    expect(has(tree, 'vendor.service')).toBe(false);
    if (SYSTEMCTL) expect(unitLinks(tree)).toEqual(await reference(env, {}, [['enable', 'vendor.service']]));
  });

  it('removes the links of an older [Install] section when the unit changes (no stale .wants)', async () => {
    env = await ignitionEnv();
    const contents = unit('WantedBy=new.target\nAlias=old-new-alias.service');
    const tree = await stageOk(env, config({ systemd: { units: [{ name: 'old.service', enabled: true, contents }] } }));
    expect(has(tree, 'old.target.wants/old.service')).toBe(false);
    expect(has(tree, 'old-alias.service')).toBe(false);
    expect(link(tree, 'new.target.wants/old.service')).toBe('/etc/systemd/system/old.service');
    expect(link(tree, 'old-new-alias.service')).toBe('/etc/systemd/system/old.service');
    if (SYSTEMCTL) expect(unitLinks(tree)).toEqual(await reference(env, { 'etc/systemd/system/old.service': contents }, [['reenable', 'old.service']]));
  });

  it('disables a unit: every link to it goes, its file stays', async () => {
    env = await ignitionEnv();
    const tree = await stageOk(env, config({ systemd: { units: [{ name: 'old.service', enabled: false }, { name: 'never-existed.service', enabled: false }] } }));
    expect(has(tree, 'old.target.wants/old.service')).toBe(false);
    expect(has(tree, 'old-alias.service')).toBe(false);
    expect(fs.lstatSync(path.join(tree, 'etc/systemd/system/old.service')).isFile()).toBe(true);
    if (SYSTEMCTL) expect(unitLinks(tree)).toEqual(await reference(env, {}, [['disable', 'old.service']]));
  });

  it('masks with a link to /dev/null and unmasks (mask: false) by removing it, then enables', async () => {
    env = await ignitionEnv();
    const tree = await stageOk(env, config({
      systemd: {
        units: [
          { name: 'vendor.service', mask: true },
          { name: 'masked.service', mask: false, enabled: true },
          { name: 'static.service', mask: false },
        ],
      },
    }));
    expect(link(tree, 'vendor.service')).toBe('/dev/null');
    expect(has(tree, 'masked.service')).toBe(false);
    expect(link(tree, 'multi-user.target.wants/masked.service')).toBe('/usr/lib/systemd/system/masked.service');
    if (SYSTEMCTL) {
      const ref = await reference(env, {}, [['mask', 'vendor.service'], ['unmask', 'masked.service'], ['enable', 'masked.service'], ['unmask', 'static.service']]);
      expect(unitLinks(tree)).toEqual(ref);
    }
  });

  it('masks a unit given with contents (the mask wins) and keeps its drop-ins; disables it too', async () => {
    env = await ignitionEnv();
    const tree = await stageOk(env, config({
      systemd: { units: [{ name: 'old.service', mask: true, enabled: false, contents: unit('WantedBy=x.target'), dropins: [{ name: 'a.conf', contents: '[Unit]\n' }] }] },
    }));
    expect(link(tree, 'old.service')).toBe('/dev/null');
    expect(has(tree, 'old.service.d/a.conf')).toBe(true);
    expect(has(tree, 'old.target.wants/old.service')).toBe(false);
  });

  it('enables template instances and templates with DefaultInstance, with specifiers, like systemctl', async () => {
    env = await ignitionEnv();
    const tmpl = unit('WantedBy=multi-user.target %p-extra.target\nAlias=tpl-alias@.service\nDefaultInstance=one');
    const tree = await stageOk(env, config({
      systemd: { units: [{ name: 'tpl@.service', contents: tmpl, enabled: true }, { name: 'tpl@two.service', enabled: true }] },
    }));
    expect(link(tree, 'multi-user.target.wants/tpl@one.service')).toBe('/etc/systemd/system/tpl@.service');
    expect(link(tree, 'tpl-extra.target.wants/tpl@two.service')).toBe('/etc/systemd/system/tpl@.service');
    expect(link(tree, 'tpl-alias@two.service')).toBe('/etc/systemd/system/tpl@.service');
    if (SYSTEMCTL) {
      const ref = await reference(env, { 'etc/systemd/system/tpl@.service': tmpl }, [['enable', 'tpl@.service'], ['enable', 'tpl@two.service']]);
      expect(unitLinks(tree)).toEqual(ref);
    }
  });

  it('enabling a unit without an [Install] section changes nothing (as systemctl)', async () => {
    env = await ignitionEnv();
    const tree = await stageOk(env, config({ systemd: { units: [{ name: 'static.service', enabled: true }] } }));
    expect(unitLinks(tree)).toEqual(unitLinks(env.booted));
  });
});
