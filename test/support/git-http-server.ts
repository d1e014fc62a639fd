/**
 * A private Git repository over HTTPS on 127.0.0.1, as a company's Git server serves one: Git's own
 * smart-HTTP server, `git http-backend`, run as a CGI program per request behind private-https.ts
 * (which answers 401 unless the request carries the expected Authorization). Clones and fetches
 * speak the real protocol (protocol v2's `GET …/info/refs?service=git-upload-pack`, then `POST
 * …/git-upload-pack`), bodies streamed both ways, gzip-encoded requests left to the backend.
 *
 * Needs `git` with its `git-http-backend` program (Debian's `git` package has it).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { PrivateCa } from './private-ca.ts';
import { type PrivateHttps, type PrivateHttpsOptions, startPrivateHttps } from './private-https.ts';

/** git's own configuration only: nothing of the machine's or the user's. */
const GIT_ENV = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' };

/** The path of `git-http-backend`, or null when git or the program is missing. */
export function gitHttpBackend(): string | null {
  try {
    const p = join(execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim(), 'git-http-backend');
    return existsSync(p) ? p : null;
  } catch {
    return null;
  }
}

/** A bare repository `<root>/<name>` whose branch `main` has one commit of `files`. */
export function makeBareRepo(root: string, name: string, files: Record<string, string | Buffer>): void {
  const work = mkdtempSync(join(tmpdir(), 'gh-git-work-'));
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, {
      cwd,
      env: {
        ...process.env,
        ...GIT_ENV,
        GIT_AUTHOR_NAME: 'test',
        GIT_AUTHOR_EMAIL: 't@example.test',
        GIT_COMMITTER_NAME: 'test',
        GIT_COMMITTER_EMAIL: 't@example.test',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  try {
    git(work, 'init', '-q', '-b', 'main');
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), text);
    }
    git(work, 'add', '-A');
    git(work, 'commit', '-q', '-m', 'the private repository');
    git(root, 'clone', '-q', '--bare', work, name);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Serves the repositories under `projectRoot` with `git http-backend` (read-only: upload-pack). */
export function startGitHttpServer(ca: PrivateCa, projectRoot: string, o: PrivateHttpsOptions = {}): Promise<PrivateHttps> {
  const backend = gitHttpBackend();
  if (!backend) throw new Error('git-http-backend is not installed (Debian: apt-get install git)');
  return startPrivateHttps(ca, { challenge: 'Basic realm="private git"', ...o }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://git.invalid');
    // CGI/1.1 (RFC 3875): the request line and headers as variables, the body on stdin.
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...GIT_ENV,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      REMOTE_ADDR: '127.0.0.1',
      REMOTE_USER: 'token',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
    };
    // Without CONTENT_LENGTH (a chunked request) the backend reads its stdin to the end.
    if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = req.headers['content-length'];
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string' && k !== 'authorization') env[`HTTP_${k.toUpperCase().replace(/-/g, '_')}`] = v;
    }
    const cgi = spawn(backend, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    cgi.stderr.on('data', (d) => (stderr += d));
    req.pipe(cgi.stdin);
    cgi.stdin.on('error', () => {});
    // The CGI's answer: header lines (`Status: 200 OK`, …), a blank line, then the body.
    let head = Buffer.alloc(0);
    let inBody = false;
    cgi.stdout.on('data', (d: Buffer) => {
      if (inBody) return void res.write(d);
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n') >= 0 ? head.indexOf('\r\n\r\n') + 4 : head.indexOf('\n\n') >= 0 ? head.indexOf('\n\n') + 2 : -1;
      if (end < 0) return;
      inBody = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i <= 0) continue;
        const [k, v] = [line.slice(0, i).trim(), line.slice(i + 1).trim()];
        if (k.toLowerCase() === 'status') status = Number.parseInt(v, 10);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end));
    });
    cgi.on('close', (code) => {
      if (!inBody) res.writeHead(500, { 'content-type': 'text/plain' }).end(`git http-backend exited ${code}: ${stderr}\n`);
      else res.end();
    });
  });
}
