/**
 * Collects the calls made in one turn of the event loop and runs them as one batch. Slots of many
 * jobs fire in the same timer phase; one statement or one write for all of them keeps the cost per
 * slot flat as the number of jobs grows. A batch of one behaves like a direct call.
 *
 * At most `maxInFlight` batches run at once: calls made meanwhile wait and go together in the next
 * batch, so batches grow with the load instead of the statements queueing up (an overloaded
 * database gets fewer, larger statements, not more of them).
 *
 * A batch that fails is run again one input at a time, so one bad input (a value the database
 * rejects) fails only its own call, never the calls that happened to share its turn. A batch that
 * failed because the database did not answer (a timeout, a lost or refused connection) is not:
 * each call fails with that error, and the load is not multiplied by the batch's size.
 */
export class MicroBatcher<I, O> {
  private pending: Array<Call<I, O>> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    /** Runs a batch; returns one output per input, in order. */
    private readonly run: (inputs: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    private readonly maxInFlight = Number.POSITIVE_INFINITY,
    /** Calls waiting beyond this are refused at once (memory stays bounded while the database does not answer). */
    private readonly maxPending = Number.POSITIVE_INFINITY,
  ) {}

  add(input: I): Promise<O> {
    if (this.pending.length >= this.maxPending) {
      return Promise.reject(new Error(`${this.pending.length} writes already wait for the database to answer the ones before them`));
    }
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      if (!this.scheduled && this.inFlight < this.maxInFlight) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.pending.splice(0, this.maxBatch);
      this.inFlight++;
      this.runBatch(batch, () => {
        this.inFlight--;
        if (this.pending.length > 0 && !this.scheduled) {
          this.scheduled = true;
          setImmediate(() => this.flush());
        }
      });
    }
  }

  private runBatch(batch: Array<Call<I, O>>, ended: () => void): void {
    this.run(batch.map((call) => call.input)).then(
      (outputs) => {
        ended();
        batch.forEach((call, i) => call.resolve(outputs[i]!));
      },
      (error: unknown) => {
        if (batch.length === 1 || unanswered(error)) {
          ended();
          for (const call of batch) call.reject(error);
          return;
        }
        let left = batch.length;
        for (const call of batch) this.runBatch([call], () => --left === 0 && ended());
      },
    );
  }
}

/**
 * The database did not answer (rather than rejecting a value): a timeout, a connection refused,
 * lost or not to be had (`53300` too many clients, class `08` connection exceptions, `57P0x`
 * shutdowns, Prisma's P1001/P1017/P2024).
 */
function unanswered(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  const text = error instanceof Error ? `${error.name} ${error.message} ${typeof code === 'string' ? code : ''}` : String(error);
  return /timed? ?out|timeout|ECONN|EPIPE|ETIMEDOUT|connection|53300|\b08[0-9A-Z]{3}\b|57P0\d|P1001|P1017|P2024/i.test(text);
}

interface Call<I, O> {
  input: I;
  resolve(output: O): void;
  reject(error: unknown): void;
}
