#!/usr/bin/env bash
# Generates the Prisma client used by the tests into test/generated/prisma.
#
# `prisma generate` only needs the WebAssembly schema engine, but the CLI still checks that
# a schema-engine binary path exists. When the engine binary has not been downloaded (for
# example npm did not run Prisma's install script), point it at any existing file.
set -euo pipefail

cd "$(dirname "$0")/.."

if [[ -z "${PRISMA_SCHEMA_ENGINE_BINARY:-}" ]]; then
  PRISMA_SCHEMA_ENGINE_BINARY="$(command -v node)"
  export PRISMA_SCHEMA_ENGINE_BINARY
fi
export PRISMA_HIDE_UPDATE_MESSAGE=1
export CHECKPOINT_DISABLE=1

echo "[prisma] generating client (test/generated/prisma)"
exec npx --no-install prisma generate "$@"
