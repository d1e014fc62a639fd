/** find: the actions that run commands or write/delete files on every match. */
import { argDenied, type Screen } from './common.ts';

const ACTIONS: Record<string, string> = {
  '-exec': 'it runs arbitrary commands',
  '-execdir': 'it runs arbitrary commands',
  '-ok': 'it runs arbitrary commands',
  '-okdir': 'it runs arbitrary commands',
  '-delete': 'it deletes every file it matches; use rm on explicit paths',
  '-fprint': "it writes to a file of the caller's choosing",
  '-fprint0': "it writes to a file of the caller's choosing",
  '-fprintf': "it writes to a file of the caller's choosing",
  '-fls': "it writes to a file of the caller's choosing",
};

export const screenFind: Screen = (args, ctx) => {
  for (const a of args) {
    const why = Object.hasOwn(ACTIONS, a) ? ACTIONS[a] : undefined;
    if (why) return argDenied(a, ctx.base, why);
  }
  return null;
};
