/**
 * Stage 6: environment scrubbing. Only names in `env.allow` pass; PATH never does (the agent
 * sets it for the sandbox); names that change how programs load code or which programs they run
 * pass only when the policy names them explicitly (and the decision says so in a note).
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import { deny, pass, type StageResult } from './types.ts';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Names the agent sets itself. */
const AGENT_OWNED = new Set(['PATH']);
const MAX_ENV_BYTES = 64 * 1024;

/** Dangerous by exact name: each loads code, names a program to run, or rewires a toolchain. */
const DANGEROUS = new Set([
  'LD_PRELOAD',
  'LD_LIBRARY_PATH',
  'LD_AUDIT',
  'LD_DEBUG',
  'LD_DEBUG_OUTPUT',
  'LD_PROFILE',
  'LD_BIND_NOW',
  'LD_ORIGIN_PATH',
  'LD_DYNAMIC_WEAK',
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_REPL_EXTERNAL_MODULE',
  'NODE_EXTRA_CA_CERTS',
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'PROMPT_COMMAND',
  'IFS',
  'CDPATH',
  'GLOBIGNORE',
  'SHELL',
  'ZDOTDIR',
  'PYTHONPATH',
  'PYTHONSTARTUP',
  'PYTHONHOME',
  'PYTHONINSPECT',
  'PYTHONUSERBASE',
  'PYTHONBREAKPOINT',
  'PYTHONWARNINGS',
  'PYTHONEXECUTABLE',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'PERL5DB',
  'PERL_MB_OPT',
  'PERL_MM_OPT',
  'RUBYOPT',
  'RUBYLIB',
  'RUBYSHELL',
  'GEM_HOME',
  'GEM_PATH',
  'BUNDLE_GEMFILE',
  'PHPRC',
  'PHP_INI_SCAN_DIR',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'JAVA_OPTIONS',
  'CLASSPATH',
  'JAVA_HOME',
  'ERL_AFLAGS',
  'ERL_ZFLAGS',
  'ERL_FLAGS',
  'ELIXIR_ERL_OPTIONS',
  'MIX_EXS',
  'R_PROFILE',
  'R_PROFILE_USER',
  'R_ENVIRON',
  'R_ENVIRON_USER',
  'R_LIBS',
  'R_LIBS_USER',
  'DOTNET_STARTUP_HOOKS',
  'DOTNET_ADDITIONAL_DEPS',
  'CORECLR_PROFILER',
  'CORECLR_PROFILER_PATH',
  'CORECLR_ENABLE_PROFILING',
  'GOFLAGS',
  'GOTOOLCHAIN',
  'GOENV',
  'GOROOT',
  'GOPROXY',
  'CGO_CFLAGS',
  'CGO_LDFLAGS',
  'CC',
  'CXX',
  'LD',
  'AR',
  'CPP',
  'MAKEFLAGS',
  'MAKEFILES',
  'MFLAGS',
  'GNUMAKEFLAGS',
  'MAKESHELL',
  'RUSTC',
  'RUSTC_WRAPPER',
  'RUSTC_WORKSPACE_WRAPPER',
  'RUSTFLAGS',
  'CARGO_BUILD_RUSTC_WRAPPER',
  'CARGO_HOME',
  'CARGO_TARGET_DIR',
  'COMPILER_PATH',
  'GCC_EXEC_PREFIX',
  'LIBRARY_PATH',
  'CPATH',
  'C_INCLUDE_PATH',
  'CPLUS_INCLUDE_PATH',
  'EDITOR',
  'VISUAL',
  'PAGER',
  'MANPAGER',
  'LESSOPEN',
  'LESSCLOSE',
  'BROWSER',
  'SSH_ASKPASS',
  'SUDO_ASKPASS',
  'TAR_OPTIONS',
  'GZIP',
  'BZIP2',
  'XZ_OPT',
  'ZSTD_CLEVEL',
  'GREP_OPTIONS',
  'AWKPATH',
  'AWKLIBPATH',
  'POSIXLY_CORRECT',
  'HOME',
  'TMPDIR',
  'XDG_CONFIG_HOME',
  'XDG_DATA_HOME',
  'XDG_CACHE_HOME',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'OPENSSL_CONF',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'all_proxy',
  'NO_PROXY',
  'no_proxy',
  'MALLOC_CHECK_',
  'GCONV_PATH',
  'LOCPATH',
  'NLSPATH',
  'TZDIR',
  'HOSTALIASES',
  'RESOLV_HOST_CONF',
  'LOCALDOMAIN',
]);
/** Dangerous by prefix: whole families (GIT_SSH_COMMAND, GIT_CONFIG_*, DYLD_INSERT_LIBRARIES, …). */
const DANGEROUS_PREFIXES = [
  'LD_',
  'DYLD_',
  'GIT_',
  'NODE_',
  'NPM_CONFIG_',
  'npm_config_',
  'PYTHON',
  'PERL',
  'RUBY',
  'BASH_FUNC_',
  'JAVA_',
  'DOTNET_',
  'COMPlus_',
  'CARGO_',
  'RUSTUP_',
  'GCC_',
  'ERL_',
  'MIX_',
  'HEX_',
  'BUNDLE_',
  'GEM_',
  'PIP_',
  'UV_',
  'DENO_',
  'BUN_',
];

function isDangerousEnvName(name: string): boolean {
  return DANGEROUS.has(name) || DANGEROUS_PREFIXES.some((p) => name.startsWith(p));
}

export function screenEnv(policy: PolicyDocument, env: Record<string, string> | undefined): StageResult<Record<string, string>> {
  if (env === undefined) return pass({});
  const allow = policy.env.allow;
  const out: Record<string, string> = {};
  const notes: string[] = [];
  let bytes = 0;
  for (const [name, value] of Object.entries(env)) {
    if (!NAME.test(name)) return deny(`Environment variable name ${JSON.stringify(name)} is invalid: names are [A-Za-z_][A-Za-z0-9_]*`);
    if (AGENT_OWNED.has(name)) return deny(`Environment variable "${name}" cannot be set by the caller: the agent sets ${name} for the sandbox`);
    if (typeof value !== 'string') return deny(`Environment variable "${name}" must be a string`);
    if (value.includes('\u0000')) return deny(`Environment variable "${name}" contains a NUL byte`);
    const listed = allow.includes(name);
    if (isDangerousEnvName(name)) {
      if (!listed) {
        return deny(
          `Environment variable "${name}" is not allowed: it can make programs load code or run other programs; only a policy that lists it in env.allow explicitly passes it (env.allow: [${allow.join(', ')}])`,
        );
      }
      notes.push(`env ${name} passed because env.allow names it explicitly`);
    } else if (!listed) {
      return deny(`Environment variable "${name}" is not in the allowed list (env.allow: [${allow.join(', ')}])`);
    }
    bytes += name.length + value.length + 2;
    if (bytes > MAX_ENV_BYTES) return deny(`Environment variables exceed ${MAX_ENV_BYTES} bytes in total`);
    out[name] = value;
  }
  return pass(out, notes);
}
