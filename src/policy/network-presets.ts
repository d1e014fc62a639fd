/**
 * Named host lists a team's `network.presets` may name (docs/network.md prints them from here).
 * Each entry says which ecosystem needs it and the methods it needs: reads (`GET`, `HEAD`) where
 * downloading is all a build does; git's smart HTTP also `POST`s its fetch negotiation
 * (`git-upload-pack`), so the code hosts allow `POST`. Ports are the default 80 and 443.
 *
 * Method rules are enforced for plain HTTP only: for HTTPS the egress proxy sees the host
 * (`CONNECT` and the TLS SNI), not the request inside the tunnel (docs/network.md).
 */
import type { HttpMethod, NetworkAllow, NetworkPresetName } from '../contracts/network.ts';

interface PresetGroup {
  /** Who needs these hosts (shown in docs and in policy_check). */
  what: string;
  hosts: readonly string[];
  methods: readonly HttpMethod[];
}

export interface NetworkPreset {
  description: string;
  groups: readonly PresetGroup[];
}

const READ: readonly HttpMethod[] = ['GET', 'HEAD'];
/** git over smart HTTP: `GET …/info/refs`, then `POST …/git-upload-pack` for the pack. */
const GIT_FETCH: readonly HttpMethod[] = ['GET', 'HEAD', 'POST'];

export const NETWORK_PRESETS: Readonly<Record<NetworkPresetName, NetworkPreset>> = {
  'package-registries': {
    description: 'The public package registries and code hosts that builds download dependencies from',
    groups: [
      { what: 'npm (npm, yarn, pnpm)', hosts: ['registry.npmjs.org'], methods: READ },
      { what: 'PyPI (pip, uv, poetry)', hosts: ['pypi.org', 'files.pythonhosted.org'], methods: READ },
      { what: 'crates.io (cargo)', hosts: ['crates.io', 'static.crates.io', 'index.crates.io'], methods: READ },
      { what: 'Go modules (go mod download)', hosts: ['proxy.golang.org', 'sum.golang.org'], methods: READ },
      { what: 'Maven Central (maven, gradle)', hosts: ['repo.maven.apache.org', 'repo1.maven.org'], methods: READ },
      { what: 'RubyGems (gem, bundler)', hosts: ['rubygems.org', 'index.rubygems.org'], methods: READ },
      {
        what: 'Debian and Ubuntu archives (apt)',
        hosts: ['deb.debian.org', 'security.debian.org', 'archive.ubuntu.com', 'security.ubuntu.com'],
        methods: READ,
      },
      { what: 'GitHub (git clone and fetch)', hosts: ['github.com'], methods: GIT_FETCH },
      { what: 'GitHub archives and release files', hosts: ['codeload.github.com', 'objects.githubusercontent.com'], methods: READ },
      { what: 'GitLab (git clone and fetch, archives)', hosts: ['gitlab.com'], methods: GIT_FETCH },
    ],
  },
};

/** A preset as allowlist entries, in the order listed above. */
export function presetEntries(name: NetworkPresetName): NetworkAllow[] {
  return NETWORK_PRESETS[name].groups.flatMap((g) => g.hosts.map((host) => ({ host, methods: [...g.methods] })));
}

/** Every host a preset lists. */
export function presetHosts(name: NetworkPresetName): string[] {
  return NETWORK_PRESETS[name].groups.flatMap((g) => [...g.hosts]);
}
