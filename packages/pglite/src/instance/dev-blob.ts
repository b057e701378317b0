/** `/dev/blob`: the `blob` query option as `COPY ... FROM` input, and what `COPY ... TO` wrote as `result.blob`. */
import type { Backend } from '../engine/backend/backend.js'

/** Input for `COPY ... FROM '/dev/blob'` during one call. */
export async function feedBlob(backend: Backend, blob: Blob): Promise<void> {
  await backend.blob.feed(blob)
}

/** What `COPY ... TO '/dev/blob'` wrote during the call becomes `result.blob`. */
export function attachWrittenBlob<R extends object>(backend: Backend, result: R): R {
  const written = backend.blob.takeOutput()
  if (written) Object.assign(result, { blob: new Blob(written as BlobPart[]) })
  return result
}

export function endBlob(backend: Backend | undefined): void {
  const blob = backend?.blob
  if (!blob) return
  blob.clearInput()
  // Output of a failed call must not reach the next one.
  blob.takeOutput()
}
