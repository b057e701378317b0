// The build names entry points by file under src/ and writes their .d.ts beside
// dist/<name>.js, so the nested module gets a flat entry.
export * from './live/index.js'
