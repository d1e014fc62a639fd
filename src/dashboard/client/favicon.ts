/** The dashboard's icon (`favicon.svg`): a gate in the header's colours, served like the other assets. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#0d1117"/>
<path d="M7 26V12a9 9 0 0 1 18 0v14" fill="none" stroke="#f0f6fc" stroke-width="3"/>
<path d="M12 26v-9h8v9" fill="none" stroke="#ff9800" stroke-width="3"/>
</svg>
`;
