/**
 * The dashboard's one HTML document. Everything it shows is built by `main.js` from admin API
 * answers; the document itself holds no data and no inline script or style.
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Gatehouse dashboard</title>
<link rel="icon" href="/dashboard/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/dashboard/assets/style.css">
<script type="module" src="/dashboard/assets/main.js"></script>
</head>
<body>
<header>
<span class="brand">Gatehouse</span>
<nav id="nav" aria-label="Sections"></nav>
<span id="who" class="who"></span>
<button id="signout" type="button" hidden>Sign out</button>
</header>
<main id="main" tabindex="-1">
<noscript><p>The Gatehouse dashboard needs JavaScript. The same operations are available from the <code>gatehouse</code> CLI.</p></noscript>
</main>
</body>
</html>
`;
