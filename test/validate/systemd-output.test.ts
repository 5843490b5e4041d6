import { describe, expect, it } from 'vitest';
import { classifySystemdOutput, type OutputContext } from '../../src/validate/systemd-output.js';

const TREE = '/sysroot/work/0002/tree';
const ctx = (o: Partial<OutputContext> = {}): OutputContext => ({
  treePathOf: (h) => (h.startsWith(TREE + '/') ? h.slice(TREE.length + 1) : null),
  unitPathOf: (u) => `etc/systemd/system/${u}`,
  commandDirInTree: () => false,
  osUnitsInTree: false,
  stubUnits: new Set(),
  ...o,
});

// Lines as systemd 252 prints them for `verify --root=TREE` on a tree without an OS in it.
describe('the systemd-analyze output rule', () => {
  it('keeps real errors: unknown section, unknown key, missing ExecStart=, bad header, failed load', () => {
    const out = [
      `${TREE}/etc/systemd/system/a.service:3: Unknown section 'Servce'. Ignoring.`,
      `${TREE}/etc/systemd/system/b.service:4: Unknown key 'ExecStrat' in section [Service], ignoring.`,
      'b.service: Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing.',
      'Unit b.service has a bad unit file setting.',
      `${TREE}/etc/systemd/system/c.service:2: Invalid section header '[Service'`,
      'Unit c.service failed to load properly, please adjust/correct and reload service manager: Bad message',
    ].join('\n');
    const { issues, dropped } = classifySystemdOutput(out, ctx());
    expect(dropped).toEqual([]);
    expect(issues.map((i) => [i.severity, i.path])).toEqual([
      ['error', 'etc/systemd/system/a.service'],
      ['error', 'etc/systemd/system/b.service'],
      ['error', 'etc/systemd/system/b.service'],
      ['error', 'etc/systemd/system/b.service'],
      ['error', 'etc/systemd/system/c.service'],
      ['error', 'etc/systemd/system/c.service'],
    ]);
    expect(issues[0]!.message).toBe("systemd-analyze: line 3: Unknown section 'Servce'. Ignoring.");
    expect(issues.every((i) => i.code === 'SYSTEMD_UNIT_INVALID')).toBe(true);
  });

  it('drops the noise a bare tree causes: missing default dependencies, commands outside the tree, man pages', () => {
    const out = [
      'good.service: Failed to create good.service/start: Unit sysinit.target not found.',
      'good.service: Command /usr/bin/true is not executable: No such file or directory',
      "doc.service: Command 'man foo(8)' failed with code 16",
    ].join('\n');
    const { issues, dropped } = classifySystemdOutput(out, ctx());
    expect(issues).toEqual([]);
    expect(dropped.map((d) => d.rule)).toEqual(['missing-dependency', 'command-not-in-tree', 'man-page']);
  });

  it('keeps "not executable" when the command\'s directory is in the tree (the unit would fail to start)', () => {
    const { issues, dropped } = classifySystemdOutput('app.service: Command /usr/bin/app is not executable: No such file or directory', ctx({ commandDirInTree: (c) => c === '/usr/bin/app' }));
    expect(dropped).toEqual([]);
    expect(issues).toEqual([{ code: 'SYSTEMD_UNIT_INVALID', path: 'etc/systemd/system/app.service', message: 'systemd-analyze: app.service: Command /usr/bin/app is not executable: No such file or directory', severity: 'error' }]);
  });

  it('drops a socket\'s missing service only when the tree ships no OS units', () => {
    const line = 'helper.socket: service helper.service not loaded, socket cannot be started.';
    expect(classifySystemdOutput(line, ctx()).dropped.map((d) => d.rule)).toEqual(['service-not-in-tree']);
    const kept = classifySystemdOutput(line, ctx({ osUnitsInTree: true }));
    expect(kept.dropped).toEqual([]);
    expect(kept.issues).toEqual([expect.objectContaining({ severity: 'error', path: 'etc/systemd/system/helper.socket' })]);
  });

  it('keeps advisory lines as warnings', () => {
    const { issues } = classifySystemdOutput(`${TREE}/etc/systemd/system/n.service:5: Special user nobody configured, this is not safe!`, ctx());
    expect(issues).toEqual([expect.objectContaining({ code: 'SYSTEMD_UNIT_WARNING', severity: 'warning', path: 'etc/systemd/system/n.service' })]);
  });

  it('keeps an unknown message as an error (never silently dropped)', () => {
    const { issues } = classifySystemdOutput('Failed to initialize manager: Something new', ctx());
    expect(issues).toEqual([expect.objectContaining({ severity: 'error', path: '', message: 'systemd-analyze: Failed to initialize manager: Something new' })]);
  });

  it('drops unit-level lines about a stub unit but keeps its drop-ins\' own lines', () => {
    const out = ['/scratch/etc/systemd/system/k.service.d/x.conf:1: Assignment outside of section. Ignoring.', 'k.service: Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing.', 'Unit k.service has a bad unit file setting.'].join('\n');
    const { issues, dropped } = classifySystemdOutput(out, ctx({ stubUnits: new Set(['k.service']), treePathOf: (h) => h.replace('/scratch/', '') }));
    expect(issues).toEqual([expect.objectContaining({ path: 'etc/systemd/system/k.service.d/x.conf', severity: 'error' })]);
    expect(dropped.map((d) => d.rule)).toEqual(['stub-unit', 'stub-unit']);
  });
});
