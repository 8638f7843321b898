#!/usr/bin/env bash
# Packs the library as `npm publish` would, from a scratch copy of the working tree, so that the
# repository's own dist/ is never touched while others test.
#   bash scripts/compat/pack.sh <workdir>      prints the path of the .tgz as its last line
# The copy holds every file git tracks or would add (untracked, not ignored), or with
# COMPAT_PACK_REF=<commit> that commit's tree; it links the repository's node_modules, runs
# `npm run build`, then `npm pack` (scripts skipped: built above).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
lib="$work/lib"
rm -rf "$lib" "$work"/*.tgz
mkdir -p "$lib"
if [[ -n "${COMPAT_PACK_REF:-}" ]]; then
  git -C "$root" archive --format=tar "$COMPAT_PACK_REF" | tar -xf - -C "$lib"
else
  (cd "$root" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$lib"
fi
ln -s "$root/node_modules" "$lib/node_modules"
(cd "$lib" && npm run build >&2 && npm pack --ignore-scripts --silent --pack-destination "$work" >/dev/null)
tarball="$(ls -t "$work"/*.tgz | head -n 1)"
echo "$tarball"
