/**
 * `prisma generate` with no network: the environment the Prisma CLI needs.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * Environment variables under which `prisma generate` runs offline.
 *
 * Generating Prisma Client 7 needs no engine binary: its query compiler is
 * WebAssembly inside `@prisma/client`. But the CLI checks at start that a
 * schema-engine binary is installed, and downloads one if not, which fails
 * without network access. `PRISMA_SCHEMA_ENGINE_BINARY` naming an existing
 * file satisfies the check; `generate` never runs it. (Commands that do run
 * it, `migrate` and `db push`, are what `pushSchema` and
 * `applyMigrations` replace.) The other two variables keep the CLI
 * from calling home.
 *
 * @example
 * ```ts
 * import { execFileSync } from 'node:child_process'
 * execFileSync('npx', ['prisma', 'generate'], { env: { ...process.env, ...offlineGenerateEnv() }, stdio: 'inherit' })
 * ```
 * @param placeholder the file to name as the engine; created empty if missing.
 */
export function offlineGenerateEnv(placeholder: string = join(tmpdir(), 'pgwasm-prisma-no-schema-engine')): Record<string, string> {
  if (!existsSync(placeholder)) {
    mkdirSync(join(placeholder, '..'), { recursive: true })
    writeFileSync(placeholder, '')
  }
  return {
    PRISMA_SCHEMA_ENGINE_BINARY: placeholder,
    CHECKPOINT_DISABLE: '1',
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
  }
}
