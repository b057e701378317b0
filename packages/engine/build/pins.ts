// pins.json: the versions and hashes the engine is built from.
import { readFileSync } from 'node:fs'
import type { PinnedFile } from './downloads.js'

export interface Pins {
  postgresql: PinnedFile & { version: string; debianVersion: string }
  emscripten: PinnedFile & { version: string; debianVersion: string }
  llvm: { major: number; debianPackages: string[] }
  buildTools: { debianPackages: string[] }
}

export const PINS_FILE = new URL('../pins.json', import.meta.url)

export function readPins(): Pins {
  return JSON.parse(readFileSync(PINS_FILE, 'utf8')) as Pins
}
