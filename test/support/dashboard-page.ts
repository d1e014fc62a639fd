/** Moves shared by the dashboard's browser tests (puppeteer-core against the real gateway). */
import type { Page } from 'puppeteer-core';

// These run inside the page (puppeteer serializes them); the test tsconfig has no DOM lib.
declare const document: any, location: any;

/** A selector for the control whose accessible name is `name` (labels, aria-label). */
export const aria = (name: string) => `::-p-aria(${name})`;

/** Replaces the value of the labelled field by typing, as a person would. */
export async function fillField(page: Page, label: string, value: string): Promise<void> {
  const el = await page.waitForSelector(aria(label), { timeout: 10_000 });
  await el!.click({ count: 3 });
  await page.evaluate((e) => {
    (e as any).value = '';
  }, el);
  await el!.type(value);
}

/** Opens a dashboard route and waits until its page heading shows. */
export async function goTo(page: Page, hash: string, heading: string): Promise<void> {
  await page.evaluate((h) => {
    location.hash = h;
  }, hash);
  await page.waitForFunction((t) => document.querySelector('main h1')?.textContent?.startsWith(t), { timeout: 15_000 }, heading);
}
