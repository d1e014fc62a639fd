/**
 * Stylesheet `style.css`: readable on a laptop screen (no page scrolls sideways, whatever the data:
 * user text wraps anywhere), a focus ring for keyboard focus only, no external fonts or images.
 */
export const STYLE_CSS = String.raw`
:root { --fg: #1b1f24; --muted: #57606a; --bg: #fff; --panel: #f6f8fa; --line: #d0d7de; --accent: #0a58ca;
  --ok: #116329; --okbg: #dafbe1; --bad: #a40e26; --badbg: #ffebe9; --warnbg: #fff8c5; --focus: #ff9800; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; padding: .6rem 1.5rem; background: #0d1117; color: #f0f6fc; }
header .brand { font-weight: 700; font-size: 1.1rem; margin-right: 1rem; }
header nav ul { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: 0; }
header nav a { color: #f0f6fc; text-decoration: none; padding: .35rem .7rem; border-radius: 6px; }
header nav a:hover { background: #30363d; }
header nav a[aria-current="page"] { background: #f0f6fc; color: #0d1117; font-weight: 600; }
header .who { margin-left: auto; color: #c9d1d9; font-size: .9rem; min-width: 0; overflow-wrap: anywhere; }
main { max-width: 1400px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: .5rem 0 .75rem; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; }
h3 { font-size: 1rem; margin: 1rem 0 .25rem; }
:focus { outline: none; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
/* A page's heading takes focus when the page opens (screen readers announce it); it is not a control, so no ring. */
[tabindex="-1"]:focus, [tabindex="-1"]:focus-visible { outline: none; }
a { color: var(--accent); }
.lead, .sub, .hint { color: var(--muted); }
.sub { font-size: .85rem; }
.hint { display: block; font-size: .8rem; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; }
.signin { max-width: 560px; margin: 3rem auto; }
.signin input { width: 100%; }
form.filters { display: flex; flex-wrap: wrap; align-items: flex-end; gap: .75rem 1rem; margin: .5rem 0 1rem; }
.field { display: flex; flex-direction: column; gap: .2rem; margin: .25rem 0; }
.field.check { flex-direction: row; align-items: center; gap: .5rem; }
label, legend { font-weight: 600; font-size: .9rem; }
fieldset { border: 1px solid var(--line); border-radius: 6px; padding: .4rem .8rem; }
input, select, textarea { font: inherit; padding: .35rem .5rem; border: 1px solid #8c959f; border-radius: 6px; background: #fff; color: var(--fg); }
textarea.code, pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
textarea.code { width: 100%; }
textarea[aria-invalid="true"] { border-color: var(--bad); box-shadow: 0 0 0 2px var(--badbg); }
button { font: inherit; padding: .4rem .9rem; border-radius: 6px; border: 1px solid #1f6feb; background: #1f6feb; color: #fff; cursor: pointer; }
button[type="button"] { background: #fff; color: var(--accent); }
button.danger { border-color: var(--bad); color: var(--bad); background: #fff; }
button:disabled { opacity: .6; cursor: default; }
.row { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; }
.pager { display: flex; gap: .75rem; align-items: center; margin: .75rem 0; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; font-size: .9rem; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; color: var(--muted); }
th, td { text-align: left; vertical-align: top; padding: .4rem .6rem; border-bottom: 1px solid var(--line); }
thead th { background: var(--panel); position: sticky; top: 0; }
td.reason { min-width: 14rem; max-width: 32rem; }
td.command { min-width: 14rem; max-width: 30rem; }
td.subject { max-width: 16rem; }
/* Short words from a closed set (tool names, ids cut to 8 characters, a time ago) stay on one line. */
.nowrap, .nowrap bdi, .nowrap code { white-space: nowrap; overflow-wrap: normal; }
td.policy { max-width: 16rem; }
/* Text from users never widens the page: a long word, path or argument wraps where it must. */
bdi, code { overflow-wrap: anywhere; }
details.cmd summary { cursor: pointer; }
details.cmd[open] summary { color: var(--muted); }
code.cmd.full { display: block; white-space: pre-wrap; background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: .25rem .4rem; margin-top: .25rem; }
.exit.bad { color: var(--bad); font-weight: 700; }
/* One argument per box: where an argument ends stays visible, whatever it holds. */
code.argv { overflow-wrap: anywhere; }
code.argv bdi.arg { background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: 0 .2em; }
bdi { unicode-bidi: isolate; }
.badge { display: inline-block; padding: 0 .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600; background: var(--panel); border: 1px solid var(--line); }
.badge.connected, .badge.allowed, .badge.approved, .badge.active, .badge.ok { background: var(--okbg); color: var(--ok); border-color: #4ac26b; }
.badge.denied, .badge.failed, .badge.revoked, .badge.lost, .badge.failed_to_start, .badge.timed_out, .badge.signaled, .badge.refused { background: var(--badbg); color: var(--bad); border-color: #ff8182; }
.badge.running, .badge.queued { background: #ddf4ff; color: #0550ae; border-color: #54aeff; }
/* How a job ended decides its colour: an exit with a non-zero code is a failure. */
.badge.bad { background: var(--badbg); color: var(--bad); border-color: #ff8182; }
.status { color: var(--muted); min-height: 1.2em; margin: .25rem 0; }
.error { color: var(--bad); font-weight: 600; min-height: 0; margin: .25rem 0; white-space: pre-wrap; }
.warn { background: var(--warnbg); border: 1px solid #d4a72c; padding: .5rem .75rem; border-radius: 6px; }
.empty { color: var(--muted); font-style: italic; }
dl.facts { display: grid; grid-template-columns: minmax(max-content, 10rem) minmax(0, 1fr); gap: .2rem 1rem; margin: .5rem 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
pre.output { background: #0d1117; color: #e6edf3; padding: .75rem; border-radius: 6px; max-height: 28rem; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .25rem 0 .5rem; }
pre.output .ln { color: #7d8590; user-select: none; }
mark { background: #f2cc60; color: #0d1117; }
.excerpt { margin: .5rem 0; }
.excerpt figcaption { font-size: .85rem; color: var(--muted); }
.verdict { font-size: 1.2rem; font-weight: 700; margin: .5rem 0 0; }
.verdict.allowed { color: var(--ok); }
.verdict.ask { color: #9a6700; }
.verdict.denied { color: var(--bad); }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(13rem, 1fr)); gap: .75rem; margin: .5rem 0 1rem; }
.tile { display: flex; flex-direction: column; padding: .75rem 1rem; border: 1px solid var(--line); border-radius: 8px; background: var(--panel); color: var(--fg); text-decoration: none; }
.tile:hover { border-color: var(--accent); }
.tile .n { font-size: 2rem; font-weight: 700; line-height: 1.1; }
.tile .label { font-weight: 600; }
.tile.ok .n { color: var(--ok); }
.tile.bad .n { color: var(--bad); }
.tile.warn .n { color: #9a6700; }
ul.states { display: flex; flex-wrap: wrap; gap: .5rem 1.25rem; list-style: none; margin: .25rem 0; padding: 0; }
ul.states a { text-decoration: none; color: var(--fg); }
iframe.appframe { display: block; width: 100%; height: 30rem; border: 1px solid var(--line); border-radius: 8px; background: #fff; }
ul.runtimes { margin: 0; padding-left: 1rem; columns: 2; font-size: .85rem; }
ul.runtimes .ver { color: var(--muted); }
@media (max-width: 800px) { ul.runtimes { columns: 1; } header .who { margin-left: 0; } }
`;
