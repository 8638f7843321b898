/*
 * The 32-bit hashes every instance computes alike: the fleet's rendezvous ranking
 * (slot.dispatcher.ts), a schedule slot's jitter (schedules/schedule.executor.ts) and the chaos
 * suite's seeds.
 */

/** FNV-1a of the text's UTF-16 code units. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Murmur3's finaliser: every input bit moves every output bit. */
export function mix(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
