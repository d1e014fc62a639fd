/**
 * Reading a job's stored output over the admin API (the dashboard's output view, downloads and
 * search). The search itself has the `query_output` shape; these are the listing and ranged reads.
 */
import { z } from 'zod';
import { StreamName } from './agent-protocol.ts';

/** Most bytes one ranged read returns; a page asks again from `nextOffset` for more. */
export const MAX_ARTIFACT_READ_BYTES = 256 * 1024;

const count = (name: string) =>
  z
    .string()
    .regex(/^\d{1,15}$/, `${name} must be a non-negative integer`)
    .transform(Number);

/** `?offset=N&length=M` reads from a byte offset; `?tail=M` reads the last M bytes. */
export const ArtifactReadQuery = z
  .object({
    offset: count('offset').optional(),
    length: count('length')
      .refine((n) => n >= 1 && n <= MAX_ARTIFACT_READ_BYTES, `length must be from 1 to ${MAX_ARTIFACT_READ_BYTES}`)
      .optional(),
    tail: count('tail')
      .refine((n) => n >= 1 && n <= MAX_ARTIFACT_READ_BYTES, `tail must be from 1 to ${MAX_ARTIFACT_READ_BYTES}`)
      .optional(),
  })
  .strict()
  .refine((q) => !(q.tail !== undefined && q.offset !== undefined), 'pass either tail or offset, not both');
export type ArtifactReadQuery = z.infer<typeof ArtifactReadQuery>;

const ArtifactStreamInfo = z.object({
  stream: StreamName,
  bytes: z.number().int(),
  lines: z.number().int(),
  truncated: z.boolean(),
  createdAt: z.number().int(),
  expiresAt: z.number().int(),
});

export const ArtifactInfo = z.object({
  artifactHandle: z.string(),
  jobId: z.string(),
  streams: z.array(ArtifactStreamInfo),
});
export type ArtifactInfo = z.infer<typeof ArtifactInfo>;

export const ArtifactChunk = z.object({
  artifactHandle: z.string(),
  stream: StreamName,
  /** Byte offset of `text` in the stream. */
  offset: z.number().int(),
  /** Bytes read (a UTF-8 character cut at either end shows as U+FFFD). */
  length: z.number().int(),
  totalBytes: z.number().int(),
  /** Where the next page starts; equal to totalBytes at the end. */
  nextOffset: z.number().int(),
  text: z.string(),
});
export type ArtifactChunk = z.infer<typeof ArtifactChunk>;
