import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The benchmark workspace root (benchmark/). */
export const BENCH_DIR = join(dirname(fileURLToPath(import.meta.url)), '..')
export const RESULTS_DIR = join(BENCH_DIR, 'results')
export const CACHE_DIR = join(BENCH_DIR, '.cache')
