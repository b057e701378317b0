/**
 * The engine's data segments, for a binary shipped without them (the
 * browser build: scripts/browser-assets.mjs). Instantiating such a module
 * leaves its static data zero; the loader writes this image in its place
 * before the glue runs the runtime's constructors. Every path that
 * instantiates the engine goes through `instantiateWith` (module.ts),
 * which looks the image up by the compiled module.
 */
export interface MemoryImage {
  /** The address of the first byte. */
  readonly base: number
  readonly bytes: Uint8Array
}

const images = new WeakMap<WebAssembly.Module, MemoryImage>()

/** Notes that instances of `module` need `image` written into their memory. */
export function setMemoryImage(module: WebAssembly.Module, image: MemoryImage): void {
  images.set(module, image)
}

/**
 * Writes `module`'s image, if it has one, into a new instance's memory.
 * The instance's start function has run: it only zeroes the BSS, which
 * lies past the image.
 */
export function writeMemoryImage(module: WebAssembly.Module, memory: WebAssembly.Memory | undefined): void {
  const image = images.get(module)
  if (!image) return
  if (!memory) throw new Error('the engine binary ships without its data segments, and its instance has no memory to write them to')
  new Uint8Array(memory.buffer, image.base, image.bytes.byteLength).set(image.bytes)
}
