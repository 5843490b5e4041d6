import { randomBytes } from 'node:crypto';

export function randomSuffix(): string {
  return randomBytes(4).toString('hex');
}
