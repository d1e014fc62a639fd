/**
 * The team's script library (src/dispatch/script-library.ts) over node:sqlite: versions, the same text is no new
 * version, unknown names and versions answered with what exists, caps, names that could be paths refused, and
 * the table survives a new instance over the same storage. The whole flow against wrangler dev is
 * test/e2e/script-library.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ScriptLibrary, type LibraryOp } from '../../src/dispatch/script-library.ts';
import { SCRIPT_SOURCE_MAX_BYTES, VERSIONS_PER_SCRIPT_MAX, scriptDigest } from '../../src/contracts/scripts.ts';
import { sqlHost } from './sql-host.ts';

const T0 = 1_800_000_000_000;
const push = async (lib: ScriptLibrary, name: string, source: string, now = T0) =>
  lib.apply({ op: 'push', name, source, sha256: await scriptDigest(source), by: 'admin', now } as LibraryOp);

describe('script library', () => {
  it('makes a new version per push, and none for the newest text again', async () => {
    const lib = new ScriptLibrary(sqlHost());
    expect(await push(lib, 'hello', 'return 1')).toMatchObject({ ok: true, value: { created: true, version: { version: 1, bytes: 8 } } });
    expect(await push(lib, 'hello', 'return 2')).toMatchObject({ ok: true, value: { created: true, version: { version: 2 } } });
    expect(await push(lib, 'hello', 'return 2')).toMatchObject({ ok: true, value: { created: false, version: { version: 2 } } });
    // The old text again is a new version: only the newest counts as "unchanged".
    expect(await push(lib, 'hello', 'return 1')).toMatchObject({ ok: true, value: { created: true, version: { version: 3 } } });
    expect(lib.apply({ op: 'get', name: 'hello' })).toMatchObject({ ok: true, value: { version: 3, source: 'return 1' } });
    expect(lib.apply({ op: 'get', name: 'hello', version: 2 })).toMatchObject({ ok: true, value: { version: 2, source: 'return 2', createdBy: 'admin' } });
    expect(lib.apply({ op: 'list' })).toMatchObject({ ok: true, value: [{ name: 'hello', version: 3, versions: 3 }] });
  });

  it('answers an unknown name with the names there are, and an unknown version with the versions', async () => {
    const lib = new ScriptLibrary(sqlHost());
    await push(lib, 'b', 'x');
    await push(lib, 'a', 'y');
    expect(lib.apply({ op: 'get', name: 'zz' })).toEqual({
      ok: false,
      code: 'not_found',
      message: 'no script named "zz" in the team library (a, b)',
      names: ['a', 'b'],
    });
    expect(lib.apply({ op: 'get', name: 'a', version: 4 })).toEqual({
      ok: false,
      code: 'not_found',
      message: 'script "a" has no version 4 (versions: 1)',
      versions: [1],
    });
    expect(lib.apply({ op: 'remove', name: 'a', version: 4 })).toMatchObject({ ok: false, versions: [1] });
    expect(lib.apply({ op: 'remove', name: 'a' })).toEqual({ ok: true, value: { removed: 1 } });
    expect(lib.apply({ op: 'versions', name: 'a' })).toMatchObject({ ok: false, code: 'not_found', names: ['b'] });
  });

  it('refuses names that are not library names (paths, upper case, empty)', async () => {
    const lib = new ScriptLibrary(sqlHost());
    for (const name of ['../x', 'a/b', 'A', '', '.hidden', 'x'.repeat(65)]) {
      expect(await push(lib, name, 'return 1')).toMatchObject({ ok: false, code: 'invalid_argument' });
      expect(lib.apply({ op: 'get', name })).toMatchObject({ ok: false, code: 'invalid_argument' });
    }
  });

  it('caps the bytes of a script and the versions it keeps', async () => {
    const lib = new ScriptLibrary(sqlHost());
    expect(await push(lib, 'big', 'x'.repeat(SCRIPT_SOURCE_MAX_BYTES + 1))).toMatchObject({ ok: false, code: 'payload_too_large' });
    expect(await push(lib, 'big', 'é'.repeat(SCRIPT_SOURCE_MAX_BYTES / 2))).toMatchObject({ ok: true });
    expect(await push(lib, 'big', `${'é'.repeat(SCRIPT_SOURCE_MAX_BYTES / 2)}x`)).toMatchObject({ ok: false, code: 'payload_too_large' });
    for (let i = 0; i < VERSIONS_PER_SCRIPT_MAX; i++) expect(await push(lib, 'many', `return ${i}`)).toMatchObject({ ok: true });
    expect(await push(lib, 'many', 'return -1')).toMatchObject({ ok: false, code: 'limit_reached' });
  });

  it('keeps its table across instances (its migration runs once)', async () => {
    const host = sqlHost();
    await push(new ScriptLibrary(host), 'kept', 'return 1');
    expect(new ScriptLibrary(host).apply({ op: 'get', name: 'kept' })).toMatchObject({ ok: true, value: { version: 1 } });
  });
});
