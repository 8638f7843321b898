/**
 * Who is up in the fleet, as this instance's last read of the member list says, and which
 * instance claims a slot first (slot.dispatcher.ts keeps it current). A watcher judges a claim
 * that has no row yet by its claimant's state, not by its own: a claimant still in the member
 * list is working through its load and will record the slot itself; only one that left the list
 * may have vanished with it.
 */
export class FleetRoster {
  private live = new Set<string>();
  private busy = new Set<string>();
  /** False until the list was read, and while it cannot be: nothing is known of the others then. */
  private known = false;
  private firstOf: ((job: string, slotMs: number) => string | undefined) | undefined;

  /**
   * The member list as just read (instance IDs of every group), who is ranked first for a slot,
   * and which instances said they were overloaded when they last renewed their entry.
   */
  update(
    instanceIds: Iterable<string>,
    firstOf: (job: string, slotMs: number) => string | undefined,
    overloaded: Iterable<string> = [],
  ): void {
    this.live = new Set(instanceIds);
    this.busy = new Set(overloaded);
    this.firstOf = firstOf;
    this.known = true;
  }

  /** The member list could not be read (or this instance left it): nobody's state is known. */
  forget(): void {
    this.known = false;
    this.firstOf = undefined;
  }

  /** The instance that claims this slot first, when the list is known. */
  claimantOf(job: string, slotMs: number): string | undefined {
    return this.known ? this.firstOf?.(job, slotMs) : undefined;
  }

  /** Whether the instance said it was overloaded when it last renewed its entry in the member list; undefined: not known. */
  overloaded(instanceId: string): boolean | undefined {
    return this.known ? this.busy.has(instanceId) : undefined;
  }

  /** Whether the instance is in the member list (it renewed its entry within the entry's life); undefined: not known. */
  alive(instanceId: string): boolean | undefined {
    return this.known ? this.live.has(instanceId) : undefined;
  }
}
