import { decodeLzma } from '../files/lzma.js'

/** pglite.data's layout as the browser build ships it (the manifest's `dataFiles`). */
export interface DataLayout {
  /** pglite.data's size: what the glue checks. */
  readonly size: number
  /** Each file's size, in the glue's order (its files lie back to back in that order). */
  readonly sizes: readonly number[]
  /** Each file's pack, an index into `packSizes`. */
  readonly packs: readonly number[]
  /** Each pack's name, decoded size and served size; pack 0 comes with the first download. */
  readonly packSizes: readonly (readonly [string, number, number])[]
}

/**
 * pglite.data in the browser build: the files every start reads come with
 * the first download; the others (time zones, text search, encodings,
 * ICU, what only initdb reads, ~1.9 MB gzipped) come in packs fetched when
 * Postgres first opens one of their files. `buffer` is the pglite.data the
 * glue is given: the fetched files in place, zeros for the others until
 * their pack comes, when they are written in place too (so the views the
 * glue cut out of it see them).
 *
 * Postgres opens a file synchronously, so a pack it needs now is fetched
 * with a synchronous request ({@link fetchSync}), and kept for the page.
 * Chromium prints a deprecation note for one on a page's thread; a worker
 * is the better home for an engine that uses these files anyway.
 */
export class LazyFiles {
  readonly buffer: ArrayBuffer
  readonly #bytes: Uint8Array
  readonly #layout: DataLayout
  readonly #offsets: number[]
  readonly #loaded: boolean[]
  readonly #packUrl: (name: string) => string

  /** @param first pack 0's bytes (its files in order). @throws Error when they do not add up to the layout. */
  constructor(layout: DataLayout, first: Uint8Array, packUrl: (name: string) => string) {
    this.#layout = layout
    this.#packUrl = packUrl
    this.buffer = new ArrayBuffer(layout.size)
    this.#bytes = new Uint8Array(this.buffer)
    this.#offsets = []
    let at = 0
    for (const size of layout.sizes) {
      this.#offsets.push(at)
      at += size
    }
    if (at !== layout.size) throw new Error(`pglite.data's layout adds up to ${at} bytes, not ${layout.size}`)
    this.#loaded = layout.packSizes.map(() => false)
    this.#place(0, first)
  }

  /** Whether the `index`-th file of the glue's list is there (its pack fetched). */
  has(index: number): boolean {
    return this.#loaded[this.#layout.packs[index]!] === true
  }

  /** The `index`-th file's size, as the layout has it. */
  sizeOf(index: number): number {
    return this.#layout.sizes[index]!
  }

  /** Fetches the `index`-th file's pack now, if it is not there. @throws Error naming the URL when it cannot be had. */
  loadSync(index: number): void {
    const pack = this.#layout.packs[index]!
    if (this.#loaded[pack]) return
    const [name, bytes, served] = this.#layout.packSizes[pack]!
    const url = this.#packUrl(name)
    const packed = fetchSync(url)
    if (packed.byteLength !== served) throw new Error(`engine asset ${url} is ${packed.byteLength} bytes, this build expects ${served}: truncated, or not the file of this version`)
    this.#place(pack, decodeLzma(packed, bytes))
  }

  /** Fetches every pack not there yet (initdb reads most of them). @throws Error naming the URL of one that cannot be had. */
  async loadAll(): Promise<void> {
    await Promise.all(
      this.#layout.packSizes.map(async ([name, bytes, served], pack) => {
        if (this.#loaded[pack]) return
        const url = this.#packUrl(name)
        const response = await fetch(url)
        if (!response.ok) throw new Error(`cannot load engine asset ${url}: HTTP ${response.status}`)
        const packed = new Uint8Array(await response.arrayBuffer())
        if (packed.byteLength !== served) throw new Error(`engine asset ${url} is ${packed.byteLength} bytes, this build expects ${served}`)
        if (!this.#loaded[pack]) this.#place(pack, decodeLzma(packed, bytes))
      }),
    )
  }

  #place(pack: number, bytes: Uint8Array): void {
    let at = 0
    const { packs, sizes } = this.#layout
    for (let i = 0; i < packs.length; i++) {
      if (packs[i] !== pack) continue
      this.#bytes.set(bytes.subarray(at, at + sizes[i]!), this.#offsets[i]!)
      at += sizes[i]!
    }
    if (at !== bytes.byteLength) throw new Error(`pglite.data pack ${this.#layout.packSizes[pack]![0]} is ${bytes.byteLength} bytes, its files ${at}`)
    this.#loaded[pack] = true
  }
}

/**
 * GETs `url` synchronously. A page's thread may not ask for an
 * ArrayBuffer in a synchronous request, so there the bytes come as a
 * string of one char per byte (the user-defined charset).
 */
function fetchSync(url: string): Uint8Array {
  if (typeof XMLHttpRequest !== 'function') {
    throw new Error(`cannot load engine asset ${url}: Postgres needs it now, and this context has no synchronous request (use @pgwasm/pglite/embedded here)`)
  }
  const xhr = new XMLHttpRequest()
  xhr.open('GET', url, false)
  let asText = false
  try {
    xhr.responseType = 'arraybuffer'
  } catch {
    xhr.overrideMimeType('text/plain; charset=x-user-defined')
    asText = true
  }
  try {
    xhr.send()
  } catch (cause) {
    throw new Error(`cannot load engine asset ${url}: ${String(cause)}`, { cause })
  }
  if (xhr.status !== 200) throw new Error(`cannot load engine asset ${url}: HTTP ${xhr.status} ${xhr.statusText}`.trim())
  if (!asText) return new Uint8Array(xhr.response as ArrayBuffer)
  const text = xhr.responseText
  const out = new Uint8Array(text.length)
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff
  return out
}
