import { StagedrootError } from '../../errors.js';

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

/** Node's process.arch in OCI's (Go's GOARCH) words. */
const GOARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64', mips: 'mips', mipsel: 'mipsle' };

export function hostPlatform(): Platform {
  return { os: 'linux', architecture: GOARCH[process.arch] ?? process.arch };
}

/** "linux/arm64" or "linux/arm/v7" (the --platform option). */
export function parsePlatform(s: string): Platform {
  const m = /^([a-z0-9]+)\/([a-z0-9_]+)(?:\/([a-z0-9]+))?$/.exec(s);
  if (!m) throw new StagedrootError('USAGE', `Expected --platform to be OS/ARCH[/VARIANT] (such as linux/amd64), got ${JSON.stringify(s)}`, { option: 'platform', value: s });
  return { os: m[1]!, architecture: m[2]!, ...(m[3] ? { variant: m[3] } : {}) };
}

export function showPlatform(p: Partial<Platform>): string {
  return [p.os ?? '?', p.architecture ?? '?', ...(p.variant ? [p.variant] : [])].join('/');
}

/** Whether an image's platform is the wanted one (a variant counts only when one is asked for). */
export function platformMatches(have: Partial<Platform>, want: Platform): boolean {
  return have.os === want.os && have.architecture === want.architecture && (want.variant === undefined || have.variant === want.variant);
}
