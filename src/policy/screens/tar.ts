/**
 * tar: options that run a program (checkpoint actions, --to-command, compressors, volume
 * scripts, remote shells). GNU tar takes abbreviated long options, clustered short options
 * (`-cIf`) and the old dashless style (`tar cIf x.tar prog`), so all three are screened.
 */
import { argDenied, type Screen } from './common.ts';
import { clusterFind, isLong, shortCluster } from './options.ts';

const LONG: { name: string; why: string; exact?: string[] }[] = [
  { name: 'checkpoint-action', why: 'it can run arbitrary commands (exec=…)', exact: ['checkpoint'] },
  { name: 'to-command', why: 'it pipes every file to an arbitrary command' },
  { name: 'use-compress-program', why: 'it runs an arbitrary program as the compressor' },
  { name: 'info-script', why: 'it runs an arbitrary script at the end of each volume' },
  { name: 'new-volume-script', why: 'it runs an arbitrary script at the end of each volume' },
  { name: 'rsh-command', why: 'it runs an arbitrary program as the remote shell' },
  { name: 'rmt-command', why: 'it runs an arbitrary program as the remote tape server' },
];
const SHORT: Record<string, string> = {
  I: 'it runs an arbitrary program as the compressor (--use-compress-program)',
  F: 'it runs an arbitrary script at the end of each volume (--info-script)',
};
/** Short options that take a value: letters after them in a cluster are that value. */
const VALUED = 'fCTXbKNLVgHIF';

export const screenTar: Screen = (args, ctx) => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') break;
    for (const l of LONG) if (isLong(a, l.name, { abbrev: true, exact: l.exact })) return argDenied(a, ctx.base, l.why);
    const cluster = shortCluster(a);
    if (cluster) {
      const hit = clusterFind(cluster, 'IF', VALUED.replace('I', '').replace('F', ''));
      if (hit) return argDenied(a, ctx.base, SHORT[hit]);
    } else if (i === 0 && /^[A-Za-z]+$/.test(a)) {
      // Old style: every letter is an option, each valued one taking a later argument.
      for (const c of a) if (SHORT[c]) return argDenied(a, ctx.base, SHORT[c]);
    }
  }
  return null;
};
