/**
 * A gVisor sandbox's /etc (executor/sandbox/etc-snapshot.ts): the allowlisted host entries copied into the
 * read-only root when the driver starts, instead of one bind mount per entry in every sandbox. Real runsc;
 * the job looks from inside: the same content as the host's, nothing of /etc outside the allowlist, no /etc
 * mount, read-only, and what the sandbox user could not read on the host it cannot read inside either.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { requireTool, suiteRig } from '../helpers.ts';

const d = requireTool('gvisor') ? describe : describe.skip;

d('gvisor: the sandbox /etc is a copy of the allowlisted host entries', () => {
  const rig = suiteRig('gvisor', { warm: 0 });

  const sh = async (command: string) => (await rig.run({ mode: 'shell', command })).exit;

  it('shows the host files as they are, and none of /etc outside the allowlist', async () => {
    const exit = await sh(
      'cat /etc/os-release; echo ---; cat /etc/passwd; echo ---; test -e /etc/shadow && echo shadow-visible; test -e /etc/gatehouse-nope; ls /etc | wc -l',
    );
    const [osRelease, passwd, rest] = exit.stdout.split('---\n');
    expect(osRelease).toBe(readFileSync('/etc/os-release', 'utf8'));
    expect(passwd).toBe(readFileSync('/etc/passwd', 'utf8'));
    expect(rest).not.toContain('shadow-visible');
    expect(existsSync('/etc/shadow')).toBe(true); // on the host it is there: the sandbox leaves it out
  });

  it('mounts nothing at /etc: the copies live in the read-only root, which a job cannot write', async () => {
    const exit = await sh(
      'awk \'$5 ~ "^/etc" {print $5}\' /proc/self/mountinfo; touch /etc/passwd 2>&1 || echo refused; echo x > /etc/new-file 2>&1 || echo refused',
    );
    const lines = exit.stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('/etc'))).toEqual([]);
    expect(lines.filter((l) => l === 'refused')).toHaveLength(2);
  });

  it("keeps the host's modes: a directory the sandbox user cannot read on the host stays unreadable", async (ctx) => {
    const priv = '/etc/ssl/private';
    if (!existsSync(priv) || (statSync(priv).mode & 0o005) !== 0) ctx.skip(); // not on this host, or world-readable here
    const exit = await sh(`ls ${priv} 2>&1; echo status=$?`);
    expect(exit.stdout).toMatch(/Permission denied/);
    expect(exit.stdout).toMatch(/status=[1-9]/);
  });

  it('resolves the links of /etc/alternatives into the mounted /usr, as on the host', async () => {
    const exit = await sh('for l in /etc/alternatives/*; do [ -L "$l" ] && { readlink "$l"; break; }; done');
    const link = exit.stdout.trim();
    expect(link).toMatch(/^\//);
    const probe = await sh(`test -e "$(readlink -f /etc/alternatives/$(ls /etc/alternatives | head -1))" && echo resolves`);
    expect(probe.stdout).toContain('resolves');
  });
});
