// Re-exports typescript-eslint as installed in this folder, next to the TypeScript 6.0 it
// needs (see package.json). eslint.config.js imports it from here.
export { default } from 'typescript-eslint';
