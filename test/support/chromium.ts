/**
 * Debian's chromium for the browser tests, driven by puppeteer-core (no browser download here).
 * Under CI=true a missing chromium is a failure (`.ci/run` installs it); elsewhere the tests skip and say so.
 */
import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);

/** Throws under CI when chromium is missing; otherwise warns that `what` is skipped. */
export function requireChromium(what: string): void {
  if (!HAVE_CHROMIUM && process.env.CI === 'true') throw new Error(`chromium is required under CI=true (${CHROMIUM}; .ci/run installs it)`);
  if (!HAVE_CHROMIUM) console.warn(`${what} skipped: no chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
}

/** Headless, a fresh profile, and none of chromium's background connections (the network here is closed). */
export function launchChromium(userDataDir: string): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}
