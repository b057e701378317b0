// What the side modules of a build (lib/postgresql/*.so) need from the
// backend: every symbol they import that none of them defines. A main
// module linked with -sMAIN_MODULE=2 exports only what it is told to, so
// this list is part of its export list.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** Imports the dynamic loader itself provides to every side module. */
const FROM_THE_LOADER = new Set(['memory', '__indirect_function_table', '__stack_pointer', '__memory_base', '__table_base'])

/** Sorted names of the backend symbols the side modules in `dir` import (functions and data). */
export function sideModuleImports(dir: string): string[] {
  const imported = new Set<string>()
  const defined = new Set<string>()
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.so'))) {
    const module = new WebAssembly.Module(readFileSync(join(dir, file)))
    for (const entry of WebAssembly.Module.exports(module)) defined.add(entry.name)
    for (const entry of WebAssembly.Module.imports(module)) {
      // env: functions and the loader's globals; GOT.mem / GOT.func: addresses of data and functions.
      if (['env', 'GOT.mem', 'GOT.func'].includes(entry.module) && !FROM_THE_LOADER.has(entry.name)) imported.add(entry.name)
    }
  }
  const names = [...imported].filter((name) => !defined.has(name)).sort()
  if (names.length === 0) throw new Error(`no side module in ${dir} imports anything from the backend`)
  return names
}
