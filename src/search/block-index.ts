/**
 * The search index of an artifact stream: the body cut into line-aligned blocks, and per block its
 * line count, the byte offsets of the few lines at its edges (for context lines across blocks), a
 * filter of the trigrams it holds, and the range of its digit runs of each length (for numbers,
 * whose trigrams every block holds: block-index/digits.ts). `query_output` reads the index, then
 * only the blocks that may hold a term (plus the context lines around them): a rare term in 1 GB
 * costs the index and one block, not the whole body. See docs/tools.md ("How search scales").
 *
 * What the filter holds, so that it never misses a match of the line search (line-search.ts, which
 * lowercases text and terms and matches substrings within a line): trigrams of the body's bytes with
 * ASCII letters folded to lowercase, never across a '\n', and never through a non-ASCII byte —
 * except the two non-ASCII characters whose lowercase form starts with an ASCII letter (U+0130 'İ'
 * → 'i̇', U+212A KELVIN SIGN → 'k'), which count as that letter. Only queries whose terms are all
 * ASCII and at least 3 characters long use it; any other query scans the whole body, as without an
 * index. The filter may say yes wrongly (a block is read for nothing), never no wrongly.
 *
 * The index is built by whoever holds the bytes as a stream (the agent, before uploading them):
 * `BlockIndexBuilder` is pure and takes chunks of any size.
 *
 * This module is the index's one door for the edge and the agent: what an index is and its encoding
 * (block-index/format.ts), the builder (builder.ts) and what a search asks of an index (lookup.ts).
 */
export { BlockIndexBuilder } from './block-index/builder.ts';
export {
  BadIndex,
  type BlockIndex,
  decodeBlockIndex,
  SEARCH_BLOCK_BYTES,
  SEARCH_INDEX_CONTEXT_MAX,
  SEARCH_INDEX_MAX_BYTES,
  SEARCH_INDEX_MIN_BYTES,
} from './block-index/format.ts';
export { lineBoundary, mayMatch, termProbes } from './block-index/lookup.ts';
